// The `conditions` example in JavaScript: a `Service.js.example.dev`
// reports two conditions of different lifetimes.
//
// - `Configured` is durable: it follows from the spec alone, so it holds
//   across restarts.
// - `Serving` is a liveness condition: it describes something alive in this
//   process (the service it pretends to start). After a restart the store
//   reads it as Unknown, unconfirmed, until this plugin confirms it; the
//   plugin asks for a pass of every object at each start to do so.

import { Action, condition, exportController, violation } from 'beehive-guest';

const validPort = (port) => Number.isInteger(port) && port >= 1 && port <= 65535;

/** The controller; app_v2.js extends it. */
export const services = {
  registration: { group: 'js.example.dev', kind: 'Service', startupFullPass: true },

  specSchema: {
    type: 'object',
    properties: {
      port: { type: 'integer', description: 'The port to listen on (1-65535).' },
      enabled: { type: 'boolean', description: 'Whether it should serve at all.', default: true },
    },
    required: ['port'],
    additionalProperties: false,
  },

  statusSchema: {
    type: 'object',
    properties: {
      endpoint: { type: ['string', 'null'], description: '`http://NAME:PORT` while serving.' },
    },
  },

  /** How the Serving condition reads while serving; app_v2 changes it. */
  servingMessage: (port) => `listening on :${port}`,

  // A port outside 1-65535 is refused where it is written; the InvalidPort
  // condition remains for specs stored before.
  validate(spec) {
    return validPort(spec.port) ? [] : [violation('spec.port', `${spec.port} is outside 1-65535`)];
  },

  reconcile(client, service) {
    const { port, enabled = true } = service.spec;
    const valid = validPort(port);
    const configured = valid
      ? condition('Configured', true, { reason: 'ValidPort' })
      : condition('Configured', false, {
          reason: 'InvalidPort',
          message: `port ${port} is outside 1-65535`,
        });
    let serving;
    if (valid && enabled) {
      serving = condition('Serving', true, { reason: 'Listening', message: this.servingMessage(port) });
    } else if (valid) {
      serving = condition('Serving', false, { reason: 'Disabled' });
    } else {
      serving = condition('Serving', false, { reason: 'NotConfigured' });
    }
    serving.liveness = true;
    const endpoint = valid && enabled ? `http://${service.meta.name}:${port}` : null;
    // One write for both, so a reader never sees one without the other.
    client.setConditions([configured, serving]);
    client.updateStatus({ endpoint });
    return Action.settled();
  },
};

export const controller = exportController(services);
