// The clients a pass uses: `Client`, bound to the pass's object, and
// `KindClient` for any kind. Both take and give plain JSON values and
// throw `BeehiveError`; both stop working (`client-closed`) once the pass
// returns. Underneath is a backend: the host's resources inside a
// component, the fake's memory under test.

import { BeehiveError } from './errors.js';

/** How many objects one page of `KindClient.list` asks the host for. */
export const LIST_PAGE = 500;

/** An object as a pass sees it: `meta`, and spec and status parsed. */
export function decodeObject(raw) {
  const parse = (text, what) => {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new BeehiveError('decode', `${what} of ${raw.meta.name}: ${error.message}`);
    }
  };
  return {
    meta: raw.meta,
    spec: parse(raw.spec, 'spec'),
    status: raw.status === null ? null : parse(raw.status, 'status'),
  };
}

/** JSON text of `value`, refusing what JSON cannot hold. */
export function encode(value, what) {
  const text = JSON.stringify(value);
  if (text === undefined) {
    throw new BeehiveError('invalid-document', `${what} is not a JSON value`);
  }
  return text;
}

/** What a pass writes about its object, and clients for other kinds. */
export class Client {
  #backend;

  constructor(backend) {
    this.#backend = backend;
  }

  /** The backend, while the pass lasts. */
  raw() {
    if (this.#backend === null) {
      throw new BeehiveError('client-closed', 'the pass has returned; its client cannot be used');
    }
    return this.#backend;
  }

  /** Ends the client's use: every later call throws `client-closed`. */
  close() {
    this.#backend = null;
  }

  /** Records the status (a JSON value); an equal status writes nothing. */
  updateStatus(status) {
    this.raw().updateStatus(encode(status, 'status'));
  }

  /** Writes one condition (made with `condition()`). */
  setCondition(condition) {
    this.raw().setConditions([condition]);
  }

  /** Writes several conditions as one write. */
  setConditions(conditions) {
    this.raw().setConditions([...conditions]);
  }

  /** Removes the condition of `type`, if there is one. */
  deleteCondition(type) {
    this.raw().deleteCondition(type);
  }

  /** Records an observation (made with `event.normal()` or `event.warning()`). */
  addEvent(event) {
    this.raw().addEvent(event);
  }

  /** Adds a finalizer (refused with `deletion-pending` once the object is being deleted). */
  addFinalizer(finalizer) {
    this.raw().addFinalizer(finalizer);
  }

  /** Removes a finalizer; clearing the last lets a deleting object go. */
  deleteFinalizer(finalizer) {
    this.raw().deleteFinalizer(finalizer);
  }

  /** Declares that this object depends on object `target` (an id). */
  addDependency(target) {
    this.raw().addDependency(target);
  }

  /** Drops the dependency on `target`. */
  deleteDependency(target) {
    this.raw().deleteDependency(target);
  }

  /** Whether anything with a live claim points at this object. */
  hasIncomingEdges() {
    return this.raw().hasIncomingEdges();
  }

  /** The owner (`{id, group, kind}`), or undefined. */
  owner() {
    return this.raw().getOwner();
  }

  /** What this object depends on. */
  dependencies() {
    return this.raw().listDependencies();
  }

  /** What depends on this object. */
  dependents() {
    return this.raw().listDependents();
  }

  /** What this object owns. */
  owned() {
    return this.raw().listOwned();
  }

  /**
   * Runs `body(this)` in a transaction frame: committed when it returns,
   * rolled back when it throws.
   */
  transaction(body) {
    this.raw().begin();
    let result;
    try {
      result = body(this);
    } catch (error) {
      try {
        this.raw().rollback();
      } catch {
        // The body's error is the one worth reporting.
      }
      throw error;
    }
    this.raw().commit();
    return result;
  }

  /** A client for (`group`, `kind`) whose calls join this pass. */
  kind(group, kind) {
    return new KindClient(this, this.raw().kindClient(group, kind));
  }
}

/** Objects of one kind, read and written inside the current pass. */
export class KindClient {
  #parent;
  #backend;

  constructor(parent, backend) {
    this.#parent = parent;
    this.#backend = backend;
  }

  #raw() {
    this.#parent.raw();
    return this.#backend;
  }

  /**
   * Creates `name` (`name-taken` if something holds it); options
   * `{owner, finalizers, labels}`. On an object that exists, a
   * create-or-update replaces its labels with `labels`; without them it
   * leaves them as they are.
   */
  create(name, spec, options = {}) {
    return decodeObject(this.#raw().create(name, encode(spec, 'spec'), options));
  }

  /** What holds `name`, creating it if nothing does: `{object, created}`. */
  getOrCreate(name, spec, options = {}) {
    const [raw, created] = this.#raw().getOrCreate(name, encode(spec, 'spec'), options);
    return { object: decodeObject(raw), created };
  }

  /** Makes `name` hold `spec`: `{object, created}`. */
  createOrUpdate(name, spec, options = {}) {
    const [raw, created] = this.#raw().createOrUpdate(name, encode(spec, 'spec'), options);
    return { object: decodeObject(raw), created };
  }

  /** Object `id` (`not-found` if there is none). */
  get(id) {
    return decodeObject(this.#raw().get(id));
  }

  /** What holds `name` (`not-found` if nothing does). */
  getByName(name) {
    return decodeObject(this.#raw().getByName(name));
  }

  /**
   * Every object of the kind, by id, read page by page; with a `selector`
   * (kubectl's grammar: `'tier in (web,db),!canary'`), those whose labels
   * it matches. A selector that does not parse throws `invalid-option`
   * naming the position.
   */
  list(selector) {
    const objects = [];
    let after;
    do {
      const page = this.#raw().list(after, LIST_PAGE, selector);
      objects.push(...page.objects.map(decodeObject));
      after = page.next;
    } while (after !== undefined);
    return objects;
  }

  /** Replaces the spec of `id`. */
  update(id, spec) {
    return decodeObject(this.#raw().update(id, encode(spec, 'spec')));
  }

  /** Replaces the spec of what holds `name`. */
  updateByName(name, spec) {
    return decodeObject(this.#raw().updateByName(name, encode(spec, 'spec')));
  }

  /** Requests deletion of `id`. */
  delete(id) {
    this.#raw().delete(id);
  }

  /** Requests deletion of whatever holds `name`; absent is fine. */
  deleteByName(name) {
    this.#raw().deleteByName(name);
  }

  /** The objects of this kind `owner` owns. */
  ownedBy(owner) {
    return this.#raw().listOwnedObjects(owner).map(decodeObject);
  }
}
