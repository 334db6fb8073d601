// The values a plugin works with, as plain JavaScript: the same under
// `node --test` (with the fake client) and inside a component.

/** What happens after a pass; `reconcile` returns one. */
export class Action {
  /**
   * @param {'settled' | 'unsettled' | 'failed'} verdict
   * @param {string} [message] why a failed pass failed
   * @param {number} [requeueAfterMs] the next pass after this long
   * @param {string} [trace] the stack of what a failed pass threw, shown as
   *   its ReconcileFailed event's detail; not part of what the action is
   *   (not enumerable, so two actions compare by the rest)
   */
  constructor(verdict, message = '', requeueAfterMs = undefined, trace = '') {
    this.verdict = verdict;
    this.message = message;
    this.requeueAfterMs = requeueAfterMs;
    Object.defineProperty(this, 'trace', { value: trace, enumerable: false });
    Object.freeze(this);
  }

  /** The pass observed the object's current generation. */
  static settled() {
    return new Action('settled');
  }

  /** Work done, not caught up: back after the owed-pass interval. */
  static unsettled() {
    return new Action('unsettled');
  }

  /** Failed: the backoff ladder, and a ReconcileFailed event with `message`. */
  static backoff(message) {
    return new Action('failed', String(message));
  }

  /** This action, with the next pass `ms` milliseconds from now (ignored on a failure). */
  requeueAfter(ms) {
    return new Action(this.verdict, this.message, nonNegative(ms, 'requeueAfter'));
  }
}

/** `ms` if it is a whole, non-negative number of milliseconds. */
export function nonNegative(ms, what) {
  if (!Number.isInteger(ms) || ms < 0) {
    throw new RangeError(`${what}: ${ms} is not a whole, non-negative number of milliseconds`);
  }
  return ms;
}

/**
 * A per-type observation about an object. `status` is true, false or null
 * (unknown); a `liveness` condition holds only inside the process that wrote
 * it.
 */
export function condition(type, status, { reason = '', message = '', liveness = false } = {}) {
  if (status !== true && status !== false && status !== null) {
    throw new TypeError(`condition ${type}: status is true, false or null, not ${status}`);
  }
  return { type, status, reason, message, liveness };
}

/** An observation for the object's timeline; runs aggregate by (category, type, reason). */
export const event = {
  normal(reason, message = '', { category = '', detail } = {}) {
    return { type: 'Normal', reason, message, category, detail };
  },
  warning(reason, message = '', { category = '', detail } = {}) {
    return { type: 'Warning', reason, message, category, detail };
  },
};

/** One way a spec breaks a rule: where (`spec.port`) and the rule, in words. */
export function violation(path, message) {
  return { path, message };
}

/** Identity and metadata of an object. */
export class Meta {
  constructor(fields) {
    /** @type {number} */ this.id = fields.id ?? 0;
    /** @type {string} */ this.group = fields.group ?? '';
    /** @type {string} */ this.kind = fields.kind ?? '';
    /** @type {string} */ this.name = fields.name ?? '';
    /** @type {number} */ this.generation = fields.generation ?? 1;
    /** @type {number | null} */ this.observedGeneration = fields.observedGeneration ?? null;
    /** @type {number | null} */ this.observedAtMs = fields.observedAtMs ?? null;
    /** @type {number} */ this.resourceVersion = fields.resourceVersion ?? 0;
    /** @type {number | null} */ this.deletionRequestedAtMs = fields.deletionRequestedAtMs ?? null;
    /** @type {string[]} */ this.finalizers = fields.finalizers ?? [];
    /** @type {object[]} */ this.conditions = fields.conditions ?? [];
    /** @type {Record<string, string>} */ this.labels = fields.labels ?? {};
    /** @type {number} */ this.createdAtMs = fields.createdAtMs ?? 0;
    /** @type {number} */ this.updatedAtMs = fields.updatedAtMs ?? 0;
  }

  /** Whether its deletion was requested. */
  get deleting() {
    return this.deletionRequestedAtMs !== null;
  }

  /** Its condition of `type`, if any. */
  condition(type) {
    return this.conditions.find((c) => c.type === type);
  }
}
