// Stand-ins for the host's WIT imports, for testing src/component.js under
// node: `hooks.js` resolves the `beehive:` modules here. Values are shaped
// as componentize-js shapes them (BigInt for s64, `{tag, val}` variants,
// host errors thrown with a `payload`); every call is recorded in `calls`.

/** `[name, ...args]` of every host call, in order. */
export const calls = [];

/** What the next `kind-client.get` throws, if anything. */
export const next = { error: undefined };

/** The config the operator gave. */
export const configValues = new Map();

export function log(level, message) {
  calls.push(['log', level, message]);
}

export class KindClient {
  constructor(group, kind) {
    calls.push(['kind-client', group, kind]);
    this.group = group;
    this.kind = kind;
  }

  get(id) {
    calls.push(['get', id]);
    if (next.error) {
      const payload = next.error;
      next.error = undefined;
      throw Object.assign(new Error('host error'), { payload });
    }
    return witObject({ id, name: `n${id}` });
  }

  list(after, limit, selector) {
    calls.push(['list', after, limit, selector]);
    const objects = after === undefined ? [witObject({ id: 1n }), witObject({ id: 2n })] : [witObject({ id: 3n })];
    return { objects, next: after === undefined ? 2n : undefined };
  }

  create(name, spec, options) {
    calls.push(['create', name, spec, options]);
    return witObject({ id: 9n, name, spec });
  }
}

export function get(key) {
  return configValues.get(key);
}

export function keys() {
  return [...configValues.keys()].sort();
}

/** A `controller-client` that records what the pass wrote. */
export function controllerClient() {
  const record = (name) => (...args) => calls.push([name, ...args]);
  return {
    updateStatus: record('update-status'),
    setConditions: record('set-conditions'),
    addEvent: record('add-event'),
    addDependency: record('add-dependency'),
    getOwner: () => ({ id: 4n, group: 'g', kind: 'K' }),
  };
}

/** An object as the host hands it (contract 0.2: no group or kind, and
 * `undefined` for an empty list). */
export function witObject(fields = {}) {
  return {
    id: 1n,
    name: 'web',
    spec: '{"port":8080}',
    status: undefined,
    generation: 3n,
    observedGeneration: 2n,
    observedAtMs: undefined,
    resourceVersion: 7n,
    deletionRequestedAtMs: undefined,
    finalizers: undefined,
    labels: [{ key: 'tier', value: 'web' }],
    conditions: [
      {
        type: 'Ready',
        status: 'is-false',
        reason: 'Waiting',
        message: '',
        liveness: true,
        unconfirmed: true,
        transitionedAtMs: 5n,
        updatedAtMs: 6n,
      },
    ],
    createdAtMs: 1000n,
    updatedAtMs: 2000n,
    ...fields,
  };
}
