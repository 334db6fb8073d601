// A fake host for a plugin's unit tests under `node --test`: it records
// what a pass wrote and keeps objects of other kinds in memory.
//
//   import { FakeClient } from 'beehive-guest/fake';
//   const fake = new FakeClient();
//   const action = await fake.run(services, { spec: { port: 8080 } });
//   assert.equal(fake.conditions.get('Configured').status, true);
//
// A fake made with `{ storeGrants: { read: [...], write: [...] } }` checks
// kind clients as the host checks a policy's `[store]` section: the pass's
// own kind is always read-write, any other only as granted (`Kind.group`,
// `*.group`, `*.*.suffix`, `*`); a denied call throws `not-granted` and is
// remembered in `denials`. Without it every call is allowed.

import { testHost } from './binding.js';
import { runPass } from './controller.js';
import { BeehiveError } from './errors.js';
import { Meta } from './model.js';
import { parseSelector, selectorMatches } from './selector.js';

/** Gives `key` the value `value` for `config.get`. */
export function setConfig(key, value) {
  testHost.config.set(key, String(value));
}

/** Answers `method url` with `answer`: a `Response`, or an Error to throw. */
export function stubHttp(method, url, answer) {
  testHost.httpStubs.set(`${method.toUpperCase()} ${new Request(url).url}`, answer);
}

/** The `Request`s sent since the last `reset`, in order. */
export function sentRequests() {
  return [...testHost.httpSent];
}

/** The `{level, message}` lines logged since the last `reset`. */
export function logLines() {
  return [...testHost.logLines];
}

/** Forgets config values, HTTP stubs, sent requests and log lines. */
export function reset() {
  testHost.config.clear();
  testHost.httpStubs.clear();
  testHost.httpSent.length = 0;
  testHost.logLines.length = 0;
}

const kindName = (group, kind) => (group ? `${kind}.${group}` : kind);

/** Whether store-grant `pattern` names `kind` (`Kind.group`). */
export function grantMatches(pattern, kind) {
  if (pattern === '*') return true;
  const group = kind.includes('.') ? kind.slice(kind.indexOf('.') + 1) : '';
  if (pattern.startsWith('*.*.')) {
    const suffix = pattern.slice(4);
    return group.endsWith(`.${suffix}`) && group.length > suffix.length + 1;
  }
  if (pattern.startsWith('*.')) return group === pattern.slice(2);
  return pattern === kind;
}

/** What one pass wrote, and an in-memory store for kind clients. */
export class FakeClient {
  constructor({ storeGrants = null } = {}) {
    /** What the plugin may touch besides its own kind; null allows all. */
    this.storeGrants = storeGrants;
    /** `{kind, verb}` denied so far, each once. */
    this.denials = [];
    /** The last status written, parsed. */
    this.status = null;
    /** Conditions by type. */
    this.conditions = new Map();
    /** Events, in order. */
    this.events = [];
    this.addedFinalizers = [];
    this.deletedFinalizers = [];
    /** Ids this object depends on. */
    this.dependencies = new Set();
    this.openFrames = 0;
    this.commits = 0;
    this.rollbacks = 0;
    /** @type {Map<number, {raw: object, owner: number | undefined}>} */
    this.store = new Map();
    this.nextId = 1;
    this.own = '';
    this.deleting = null;
  }

  /**
   * One pass of `controller` over an object with `spec` and `status` (JSON
   * values; `meta` sets Meta fields such as `name` or
   * `deletionRequestedAtMs`), as the host runs it. An Action, or a promise
   * of one when `reconcile` is async.
   */
  run(controller, { spec = {}, status = null, meta = {} } = {}) {
    const { group = '', kind = '' } = controller.registration ?? {};
    const raw = {
      meta: new Meta({ name: 'test', group, kind, ...meta }),
      spec: JSON.stringify(spec),
      status: status === null ? null : JSON.stringify(status),
    };
    this.own = kindName(raw.meta.group, raw.meta.kind);
    // The host refuses a finalizer added to an object being deleted.
    this.deleting = raw.meta.deleting ? `${this.own}/${raw.meta.name}` : null;
    return runPass(controller, this, raw);
  }

  /** Throws `not-granted` unless the grants allow `verb` on `kind`. */
  check(kind, verb) {
    if (this.storeGrants === null || kind === this.own) return;
    const granted = [...(this.storeGrants.write ?? [])];
    if (verb === 'read') granted.push(...(this.storeGrants.read ?? []));
    if (granted.some((pattern) => grantMatches(pattern, kind))) return;
    if (!this.denials.some((d) => d.kind === kind && d.verb === verb)) {
      this.denials.push({ kind, verb });
    }
    throw new BeehiveError('not-granted', `not granted: ${verb} on ${kind}`, { kind, verb });
  }

  checkObject(id, verb) {
    const entry = id === undefined ? undefined : this.store.get(id);
    if (entry) this.check(kindName(entry.raw.meta.group, entry.raw.meta.kind), verb);
  }

  /** Every object kind clients made, by id. */
  objects() {
    return [...this.store.values()].map((e) => e.raw).sort((a, b) => a.meta.id - b.meta.id);
  }

  // The pass's backend.

  updateStatus(text) {
    this.status = JSON.parse(text);
  }

  setConditions(conditions) {
    const types = new Set();
    for (const c of conditions) {
      if (types.has(c.type)) {
        throw new BeehiveError('duplicate-condition-type', `two ${c.type} conditions in one write`);
      }
      types.add(c.type);
    }
    for (const c of conditions) this.conditions.set(c.type, { ...c });
  }

  deleteCondition(type) {
    this.conditions.delete(type);
  }

  addEvent(event) {
    this.events.push({ ...event });
  }

  addFinalizer(finalizer) {
    if (this.deleting) throw new BeehiveError('deletion-pending', this.deleting);
    this.addedFinalizers.push(finalizer);
  }

  deleteFinalizer(finalizer) {
    this.deletedFinalizers.push(finalizer);
  }

  addDependency(target) {
    this.checkObject(target, 'read');
    this.dependencies.add(target);
  }

  deleteDependency(target) {
    this.dependencies.delete(target);
  }

  hasIncomingEdges() {
    return false;
  }

  getOwner() {
    return undefined;
  }

  listDependencies() {
    return [...this.dependencies].sort((a, b) => a - b).filter((id) => this.store.has(id)).map((id) => this.ref(id));
  }

  listDependents() {
    return [];
  }

  listOwned() {
    return [];
  }

  begin() {
    this.openFrames += 1;
  }

  commit() {
    this.closeFrame();
    this.commits += 1;
  }

  rollback() {
    this.closeFrame();
    this.rollbacks += 1;
  }

  closeFrame() {
    if (this.openFrames === 0) throw new BeehiveError('no-transaction', 'no frame is open');
    this.openFrames -= 1;
  }

  kindClient(group, kind) {
    return new FakeKind(this, group, kind);
  }

  ref(id) {
    const { group, kind } = this.store.get(id).raw.meta;
    return { id, group, kind };
  }
}

/** A kind client over the fake's in-memory store. */
class FakeKind {
  constructor(fake, group, kind) {
    this.fake = fake;
    this.group = group;
    this.kind = kind;
    this.name = kindName(group, kind);
  }

  may(verb) {
    this.fake.check(this.name, verb);
  }

  mine() {
    return [...this.fake.store.values()].filter(
      (e) => e.raw.meta.group === this.group && e.raw.meta.kind === this.kind,
    );
  }

  find(name) {
    return this.mine().find((e) => e.raw.meta.name === name)?.raw;
  }

  create(name, spec, options = {}) {
    this.may('write');
    this.fake.checkObject(options.owner, 'read');
    if (!name) throw new BeehiveError('invalid-name', 'a name cannot be empty');
    if (this.find(name)) throw new BeehiveError('name-taken', `${this.kind}/${name}`);
    const id = this.fake.nextId++;
    const meta = new Meta({
      id,
      group: this.group,
      kind: this.kind,
      name,
      finalizers: [...(options.finalizers ?? [])],
      labels: { ...(options.labels ?? {}) },
    });
    const raw = { meta, spec, status: null };
    this.fake.store.set(id, { raw, owner: options.owner });
    return raw;
  }

  getOrCreate(name, spec, options) {
    this.may('write');
    const found = this.find(name);
    return found ? [found, false] : [this.create(name, spec, options), true];
  }

  createOrUpdate(name, spec, options) {
    this.may('write');
    const found = this.find(name);
    if (!found) return [this.create(name, spec, options), true];
    // Given labels replace an object's; none leaves them, as the host does.
    if (options?.labels) found.meta.labels = { ...options.labels };
    return [this.update(found.meta.id, spec), false];
  }

  get(id) {
    this.may('read');
    const entry = this.fake.store.get(id);
    if (!entry || entry.raw.meta.group !== this.group || entry.raw.meta.kind !== this.kind) {
      throw new BeehiveError('not-found', `${this.kind} ${id}`);
    }
    return entry.raw;
  }

  getByName(name) {
    this.may('read');
    const found = this.find(name);
    if (!found) throw new BeehiveError('not-found', `${this.kind}/${name}`);
    return found;
  }

  list(after, limit, selector) {
    this.may('read');
    const wanted = parseSelector(selector ?? '');
    const ids = this.mine()
      .filter((e) => selectorMatches(wanted, e.raw.meta.labels))
      .map((e) => e.raw.meta.id)
      .filter((id) => after === undefined || id > after)
      .sort((a, b) => a - b);
    const objects = ids.slice(0, limit).map((id) => this.fake.store.get(id).raw);
    return { objects, next: ids.length > limit ? objects.at(-1).meta.id : undefined };
  }

  update(id, spec) {
    this.may('write');
    const raw = this.get(id);
    if (raw.meta.deleting) throw new BeehiveError('deletion-pending', `${this.kind}/${raw.meta.name}`);
    if (raw.spec !== spec) {
      raw.spec = spec;
      raw.meta.generation += 1;
    }
    return raw;
  }

  updateByName(name, spec) {
    return this.update(this.getByName(name).meta.id, spec);
  }

  delete(id) {
    this.may('write');
    const raw = this.get(id);
    raw.meta.deletionRequestedAtMs ??= 1;
    if (raw.meta.finalizers.length === 0) this.fake.store.delete(id);
  }

  deleteByName(name) {
    this.may('write');
    const found = this.find(name);
    if (found) this.delete(found.meta.id);
  }

  listOwnedObjects(owner) {
    this.may('read');
    return this.mine()
      .filter((e) => e.owner === owner)
      .map((e) => e.raw);
  }
}
