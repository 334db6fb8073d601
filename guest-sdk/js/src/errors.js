// The errors a host call throws: one class, `BeehiveError`, whose `code`
// names the case of the WIT contract's `error` variant (`not-found`,
// `name-taken`, ...), as Node names system errors by `code`. Two codes are
// the SDK's own reading of a case: `not-granted` (the plugin's policy does
// not grant a kind; it crosses as `other`) and `client-closed` (the pass
// returned, `reconcile-returned` on the wire).

/** Every code a `BeehiveError` may carry. */
export const CODES = Object.freeze([
  'not-found',
  'name-taken',
  'deletion-pending',
  'invalid-name',
  'wrong-kind',
  'invalid-option',
  'invalid-document',
  'decode',
  'not-loaded',
  'duplicate-condition-type',
  'invalid-condition',
  'invalid-result',
  'client-closed',
  'no-controller',
  'store-in-use',
  'dependency-cycle',
  'transaction-timed-out',
  'no-transaction',
  'concurrent-nested-transaction',
  'stale-transaction',
  'schema-version-downgrade',
  'watch-too-old',
  'watch-too-new',
  'stopped',
  'not-granted',
  'other',
]);

/** How the host's message for a store denial starts. */
const DENIAL = 'not granted: ';

/** An error a host call reported. */
export class BeehiveError extends Error {
  /**
   * @param {string} code one of `CODES`
   * @param {string} message
   * @param {object} [details] `cycle` for dependency-cycle; `kind` and `verb` for not-granted
   */
  constructor(code, message, details = {}) {
    super(message || code);
    this.name = 'BeehiveError';
    this.code = code;
    Object.assign(this, details);
  }
}

/** The `BeehiveError` for a WIT `error` value (`{tag, val}`). */
export function fromHost({ tag, val }) {
  switch (tag) {
    case 'reconcile-returned':
      return new BeehiveError('client-closed', 'the pass has returned; its client cannot be used');
    case 'dependency-cycle':
      return new BeehiveError(tag, `dependency cycle: ${val.join(' → ')}`, { cycle: [...val] });
    case 'not-granted':
      return denial(val) ?? new BeehiveError(tag, val);
    case 'other':
      return denial(val) ?? new BeehiveError(tag, val);
    default:
      return new BeehiveError(tag, typeof val === 'string' ? val : tag);
  }
}

/** The not-granted error `message` reports, if it is a denial. */
function denial(message) {
  if (!message.startsWith(DENIAL)) return undefined;
  const [verb, rest = ''] = message.slice(DENIAL.length).split(' on ');
  const kind = rest.split(' ')[0];
  if ((verb !== 'read' && verb !== 'write') || !kind) return undefined;
  return new BeehiveError('not-granted', message, { kind, verb });
}

/**
 * `call()`, with a host error (thrown by the component bindings with the
 * WIT value as its `payload`) turned into a `BeehiveError`.
 */
export function hostCall(call) {
  try {
    return call();
  } catch (error) {
    if (error !== null && typeof error === 'object' && 'payload' in error) {
      throw fromHost(error.payload);
    }
    throw error;
  }
}
