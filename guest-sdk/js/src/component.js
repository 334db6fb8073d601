// The component side: binds the host's WIT imports for the rest of the
// SDK, and converts between the contract's values and the SDK's. Only a
// component imports this module (`beehive-js build` puts it first in the
// bundle); under node the `beehive:` imports do not resolve.
//
// The contract's conventions in JavaScript (componentize-js): s64 and u64
// are BigInt, records have camelCase fields, `option` is the value or
// undefined, a variant is `{tag, val}`, and a host call that returns an
// `error` throws with the error as its `payload`.

import { log as hostLog, KindClient as HostKindClient } from 'beehive:controller/host@0.2.0';
import { get as configGet, keys as configKeys } from 'beehive:controller/config@0.2.0';

import { bindComponent } from './binding.js';
import { message, runPass } from './controller.js';
import { hostCall } from './errors.js';
import { Meta, nonNegative } from './model.js';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error']);

const toNumber = (value) => (value === undefined ? null : Number(value));
const toBigInt = (value) => (value === undefined || value === null ? undefined : BigInt(value));

/**
 * The SDK's raw object (spec and status still JSON text) from the WIT
 * record, of `group` and `kind`: contract 0.2 does not carry them (they are
 * the pass's kind, or the kind client's). An absent list is an empty one.
 */
function rawObject(object, group, kind) {
  return {
    meta: new Meta({
      id: Number(object.id),
      group,
      kind,
      name: object.name,
      generation: Number(object.generation),
      observedGeneration: toNumber(object.observedGeneration),
      observedAtMs: toNumber(object.observedAtMs),
      resourceVersion: Number(object.resourceVersion),
      deletionRequestedAtMs: toNumber(object.deletionRequestedAtMs),
      finalizers: object.finalizers ?? [],
      conditions: (object.conditions ?? []).map(fromWitCondition),
      labels: Object.fromEntries((object.labels ?? []).map((l) => [l.key, l.value])),
      createdAtMs: Number(object.createdAtMs),
      updatedAtMs: Number(object.updatedAtMs),
    }),
    spec: object.spec,
    status: object.status ?? null,
  };
}

const STATUS_FROM_WIT = { 'is-true': true, 'is-false': false, unknown: null };

function fromWitCondition(c) {
  return {
    type: c.type,
    status: STATUS_FROM_WIT[c.status],
    reason: c.reason,
    message: c.message,
    liveness: c.liveness,
    unconfirmed: c.unconfirmed,
    transitionedAtMs: Number(c.transitionedAtMs),
    updatedAtMs: Number(c.updatedAtMs),
  };
}

function toWitCondition(c) {
  const status = c.status === true ? 'is-true' : c.status === false ? 'is-false' : 'unknown';
  return {
    type: String(c.type),
    status,
    reason: c.reason ?? '',
    message: c.message ?? '',
    liveness: Boolean(c.liveness),
    unconfirmed: false,
    transitionedAtMs: 0n,
    updatedAtMs: 0n,
  };
}

function toWitEvent(e) {
  return {
    category: e.category ?? '',
    eventType: e.type === 'Warning' ? 'warning' : 'normal',
    reason: e.reason,
    message: e.message ?? '',
    detail: e.detail === undefined ? undefined : JSON.stringify(e.detail),
  };
}

const fromWitRef = (r) => ({ id: Number(r.id), group: r.group, kind: r.kind });
const fromWitRefs = (refs) => refs.map(fromWitRef);
const toWitOptions = (o = {}) => ({
  owner: toBigInt(o.owner),
  finalizers: [...(o.finalizers ?? [])],
  // Absent keeps an object's labels on a create-or-update; given, they replace them.
  labels:
    o.labels === undefined || o.labels === null
      ? undefined
      : Object.entries(o.labels).map(([key, value]) => ({ key, value: String(value) })),
});

/** The backend of one pass, over the borrowed `controller-client`. */
function passBackend(client) {
  return {
    updateStatus: (text) => hostCall(() => client.updateStatus(text)),
    setConditions: (conditions) => hostCall(() => client.setConditions(conditions.map(toWitCondition))),
    deleteCondition: (type) => hostCall(() => client.deleteCondition(type)),
    addEvent: (e) => hostCall(() => client.addEvent(toWitEvent(e))),
    addFinalizer: (f) => hostCall(() => client.addFinalizer(f)),
    deleteFinalizer: (f) => hostCall(() => client.deleteFinalizer(f)),
    addDependency: (id) => hostCall(() => client.addDependency(BigInt(id))),
    deleteDependency: (id) => hostCall(() => client.deleteDependency(BigInt(id))),
    hasIncomingEdges: () => hostCall(() => client.hasIncomingEdges()),
    getOwner: () => {
      const owner = hostCall(() => client.getOwner());
      return owner === undefined ? undefined : fromWitRef(owner);
    },
    listDependencies: () => fromWitRefs(hostCall(() => client.listDependencies())),
    listDependents: () => fromWitRefs(hostCall(() => client.listDependents())),
    listOwned: () => fromWitRefs(hostCall(() => client.listOwned())),
    begin: () => hostCall(() => client.begin()),
    commit: () => hostCall(() => client.commit()),
    rollback: () => hostCall(() => client.rollback()),
    kindClient: (group, kind) => kindBackend(new HostKindClient(group, kind), group, kind),
  };
}

/** The backend of a `KindClient` of (`group`, `kind`), over the host's `kind-client`. */
function kindBackend(kinds, group, kind) {
  const raw = (object) => rawObject(object, group, kind);
  const pair = ([object, created]) => [raw(object), created];
  return {
    create: (name, spec, o) => raw(hostCall(() => kinds.create(name, spec, toWitOptions(o)))),
    getOrCreate: (name, spec, o) => pair(hostCall(() => kinds.getOrCreate(name, spec, toWitOptions(o)))),
    createOrUpdate: (name, spec, o) =>
      pair(hostCall(() => kinds.createOrUpdate(name, spec, toWitOptions(o)))),
    get: (id) => raw(hostCall(() => kinds.get(BigInt(id)))),
    getByName: (name) => raw(hostCall(() => kinds.getByName(name))),
    list: (after, limit, selector) => {
      const page = hostCall(() => kinds.list(toBigInt(after), limit, selector ?? undefined));
      return { objects: page.objects.map(raw), next: toNumber(page.next) ?? undefined };
    },
    update: (id, spec) => raw(hostCall(() => kinds.update(BigInt(id), spec))),
    updateByName: (name, spec) => raw(hostCall(() => kinds.updateByName(name, spec))),
    delete: (id) => hostCall(() => kinds.delete(BigInt(id))),
    deleteByName: (name) => hostCall(() => kinds.deleteByName(name)),
    listOwnedObjects: (owner) => hostCall(() => kinds.listOwnedObjects(BigInt(owner))).map(raw),
  };
}

/**
 * What `describe` returns: the controller's registration, its JSON Schemas
 * (`specSchema`, `statusSchema`), and which optional exports mean
 * something (`validate` when it has one, the converters when the kind is
 * versioned).
 */
function registration(controller) {
  const r = controller.registration;
  const ms = (field) =>
    r[field] === undefined ? undefined : BigInt(nonNegative(r[field], `registration.${field}`));
  return {
    group: r.group,
    kind: r.kind,
    finalizers: [...(r.finalizers ?? [])],
    concurrency: r.concurrency,
    owedPassIntervalMs: ms('owedPassIntervalMs'),
    fullPassIntervalMs: ms('fullPassIntervalMs'),
    individualPassIntervalMs: ms('individualPassIntervalMs'),
    startupFullPass: r.startupFullPass,
    maxRetryIntervalMs: ms('maxRetryIntervalMs'),
    specSchemaVersion: r.specVersion ?? 0,
    statusSchemaVersion: r.statusVersion ?? 0,
    passDeadlineMs: ms('passDeadlineMs'),
    specSchema: schemaText(controller.specSchema),
    statusSchema: schemaText(controller.statusSchema),
    validates: typeof controller.validate === 'function',
    migrates: (r.specVersion ?? 0) !== 0 || (r.statusVersion ?? 0) !== 0,
  };
}

const schemaText = (schema) => (schema === undefined ? undefined : JSON.stringify(schema));

/** The WIT `reconcile-result` of an Action. */
function toWitResult(action) {
  const verdict =
    // The host takes the lines after the first as the event's detail.
    action.verdict === 'failed'
      ? { tag: 'failed', val: action.trace ? `${action.message}\n${action.trace}` : action.message }
      : { tag: action.verdict };
  return { verdict, requeueAfterMs: toBigInt(action.requeueAfterMs) };
}

function reconcile(controller, object, client) {
  const { group, kind } = controller.registration;
  const action = runPass(controller, passBackend(client), rawObject(object, group, kind));
  return action instanceof Promise ? action.then(toWitResult) : toWitResult(action);
}

function validate(controller, specText) {
  if (typeof controller.validate !== 'function') return [];
  try {
    return controller.validate(JSON.parse(specText)).map((v) => ({
      path: String(v.path),
      message: String(v.message),
    }));
  } catch (error) {
    // A rule that throws refuses the write rather than letting it through.
    return [{ path: 'spec', message: `validate threw ${message(error)}` }];
  }
}

/**
 * A stored document upgraded by `convertSpec` / `convertStatus`. A failure
 * is thrown with a `payload`: componentize-js returns that as the
 * result's error, where a thrown Error would trap.
 */
function convert(controller, which, fromVersion, raw) {
  const method = which === 'spec' ? 'convertSpec' : 'convertStatus';
  try {
    if (typeof controller[method] !== 'function') {
      throw new Error(`no converter from ${which} version ${fromVersion}`);
    }
    return JSON.stringify(controller[method](fromVersion, JSON.parse(raw)));
  } catch (error) {
    throw { payload: message(error) };
  }
}

bindComponent({
  log: (level, line) => hostLog(LEVELS.has(level) ? level : 'info', line),
  configGet,
  configKeys,
  fetch: (input, init) => globalThis.fetch(input, init),
  registration,
  reconcile,
  validate,
  convert,
});
