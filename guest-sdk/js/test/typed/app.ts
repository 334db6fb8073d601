// A TypeScript plugin, type-checked by `tsc -p tsconfig.json` against the
// SDK's declarations (it is not run).
import { Action, Client, BeehiveObject, Controller, condition, exportController } from 'beehive-guest';
import { FakeClient } from 'beehive-guest/fake';

interface Spec {
  replicas: number;
}
interface Status {
  ready: number;
}

const widgets: Controller<Spec, Status> = {
  registration: { group: 'example.dev', kind: 'Widget', fullPassIntervalMs: 60_000 },
  reconcile(client: Client<Status>, widget: BeehiveObject<Spec, Status>) {
    client.setCondition(condition('Ready', widget.spec.replicas > 0, { reason: 'Counted' }));
    client.updateStatus({ ready: widget.spec.replicas });
    return Action.settled();
  },
};

export const controller = exportController(widgets);
export const ran = new FakeClient().run(widgets, { spec: { replicas: 2 } });
