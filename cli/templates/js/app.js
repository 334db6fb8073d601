// The `{{name}}` plugin: reconciles `{{kind}}.{{group}}` objects. A spec
// asks for some replicas; each pass reports how many are ready in the
// status and a `Ready` condition.

import { Action, condition, exportController } from 'beehive-guest';

export const {{controller}} = {
  registration: { group: '{{group}}', kind: '{{kind}}' },

  // Checked by the host on every write of a spec, before any pass.
  specSchema: {
    type: 'object',
    properties: { replicas: { type: 'integer', minimum: 0, description: 'How many replicas to run.' } },
    required: ['replicas'],
  },

  reconcile(client, object) {
    const wanted = object.spec.replicas;
    // The real work goes here: bring about what the spec describes
    // (through HTTP or other kinds the operator grants), then report what
    // you saw.
    const ready =
      wanted === 0
        ? condition('Ready', false, { reason: 'ScaledToZero' })
        : condition('Ready', true, { reason: 'AllReplicasReady', message: `${wanted} of ${wanted} ready` });
    client.setConditions([ready]);
    client.updateStatus({ ready: wanted });
    return Action.settled();
  },
};

export const controller = exportController({{controller}});
