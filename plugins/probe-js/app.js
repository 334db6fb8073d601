// A JavaScript plugin that reaches outside the store: `Probe.js.example.dev`
// names a URL, and each pass GETs it (async, with `fetch`) and records what
// came back. A spec with `fail: "why"` makes the pass throw instead: the
// host backs the object off and records ReconcileFailed, and the plugin
// goes on serving every other object.
//
// The operator grants the hosts it may reach in `probe-js.toml` beside the
// plugin file:
//
//   [http]
//   allow = ["127.0.0.1:8080"]
//
//   [config]
//   token = { env = "PROBE_TOKEN" }   # optional: sent as a bearer token

import { Action, config, event, exportController, http, log } from 'beehive-guest';

/** The timeline the probes write. */
const CATEGORY = 'probe';

export const probes = {
  registration: { group: 'js.example.dev', kind: 'Probe' },

  async reconcile(client, probe) {
    const { url, fail, intervalMs = 5000 } = probe.spec;
    if (fail) throw new TypeError(fail);
    const headers = {};
    const token = config.get('token');
    if (token) headers.authorization = `Bearer ${token}`;
    let code = null;
    let failure = null;
    try {
      const answer = await http.fetch(url, { headers });
      code = answer.status;
      if (!answer.ok) failure = `status ${code}`;
    } catch (error) {
      failure = error.message;
    }
    log.info(`${url}: ${failure ?? code}`);
    client.addEvent(
      failure === null
        ? event.normal('Reachable', `${url} answered ${code}`, { category: CATEGORY })
        : event.warning('ProbeFailed', `${url}: ${failure}`, { category: CATEGORY }),
    );
    client.updateStatus({ state: failure === null ? 'reachable' : 'unreachable', statusCode: code });
    return Action.settled().requeueAfter(intervalMs);
  },
};

export const controller = exportController(probes);
