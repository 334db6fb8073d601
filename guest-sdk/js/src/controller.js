// The pass every controller runs through, and the helpers that make a
// controller the component's exports.
//
// A controller is a plain object (or class instance):
//
//   registration   { group, kind, ... }: what it reconciles, and how
//   reconcile(client, object) -> Action   (may be async; throw to fail)
//   errorPolicy(object, error) -> Action  optional; default: backoff
//   specSchema, statusSchema              optional JSON Schemas (exportSchema)
//   validate(spec) -> violation[]         optional rules (exportSchema)
//   convertSpec(fromVersion, spec)        optional upgrades (exportMigrator)
//   convertStatus(fromVersion, status)

import { host, insideComponent } from './binding.js';
import { Client, decodeObject } from './client.js';
import { BeehiveError } from './errors.js';
import { Action, event } from './model.js';
import * as log from './log.js';

/**
 * One pass of `controller` over `raw` (`{meta, spec, status}` as JSON text)
 * through `backend`: parse, reconcile, map a throw to the controller's
 * error policy, close the client. An Action, or a promise of one when
 * `reconcile` is async.
 */
export function runPass(controller, backend, raw) {
  let object;
  try {
    object = decodeObject(raw);
  } catch (error) {
    return quarantine(backend, raw, error);
  }
  const client = new Client(backend);
  const finish = (action) => {
    client.close();
    return checked(action);
  };
  const fail = (error) => {
    client.close();
    return failed(controller, object, error);
  };
  let result;
  try {
    result = controller.reconcile(client, object);
  } catch (error) {
    return fail(error);
  }
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    return Promise.resolve(result).then(finish, fail);
  }
  return finish(result);
}

/**
 * An object whose documents do not parse is quarantined, as the host does
 * for native controllers: a DecodeFailed Warning event and an unsettled
 * result, so it comes back on the owed-pass cadence, not the backoff ladder.
 */
function quarantine(backend, raw, error) {
  try {
    backend.addEvent(event.warning('DecodeFailed', error.message));
  } catch (failed) {
    log.warn(`cannot record DecodeFailed on ${raw.meta.name}: ${failed.message}`);
  }
  return Action.unsettled();
}

/** What `reconcile` returned, as an Action (undefined means settled). */
function checked(action) {
  if (action === undefined || action === null) return Action.settled();
  if (action instanceof Action) return action;
  return Action.backoff(`reconcile returned ${describe(action)}, not an Action`);
}

/** The controller's answer to a pass that threw `error`; never throws. */
function failed(controller, object, error) {
  const trace = error instanceof Error && typeof error.stack === 'string' ? error.stack.trimEnd() : '';
  if (trace) log.error(`${message(error)}\n${trace}`);
  const withTrace = (action) =>
    action.verdict === 'failed' && !action.trace && trace
      ? new Action(action.verdict, action.message, action.requeueAfterMs, trace)
      : action;
  if (typeof controller.errorPolicy === 'function') {
    try {
      return withTrace(checked(controller.errorPolicy(object, error)));
    } catch (policyError) {
      return Action.backoff(`errorPolicy threw ${message(policyError)} after ${message(error)}`);
    }
  }
  return withTrace(Action.backoff(message(error)));
}

/** `Name: message` of a thrown value, whatever was thrown. */
export function message(error) {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return `thrown ${describe(error)}`;
}

function describe(value) {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The component's bindings, or a clear error outside a component. */
function wire() {
  if (!insideComponent) {
    throw new BeehiveError(
      'other',
      'beehive-guest: not inside a component; build the plugin with `beehive-js build`, test it with beehive-guest/fake',
    );
  }
  return host;
}

/**
 * The component's `controller` export:
 * `export const controller = exportController(myController);`
 */
export function exportController(controller) {
  requireRegistration(controller);
  return {
    describe: () => wire().registration(controller),
    reconcile: (object, client) => wire().reconcile(controller, object, client),
    validate: (specText) => wire().validate(controller, specText),
    convertSpec: (fromVersion, raw) => wire().convert(controller, 'spec', fromVersion, raw),
    convertStatus: (fromVersion, raw) => wire().convert(controller, 'status', fromVersion, raw),
  };
}

/**
 * No longer needed: `exportController` declares the schemas and exports
 * `validate` (contract 0.2 has one `controller` interface). Kept so a
 * module written for the SDK's first contract still builds; `beehive-js
 * build` exports only `controller`.
 */
export function exportSchema(controller) {
  requireRegistration(controller);
  return {};
}

/**
 * No longer needed: `exportController` exports the converters. Kept as
 * `exportSchema` is.
 */
export function exportMigrator(controller) {
  requireRegistration(controller);
  return {};
}

function requireRegistration(controller) {
  const registration = controller?.registration;
  if (!registration || !registration.group || !registration.kind) {
    throw new TypeError('a controller needs registration: { group, kind }');
  }
  if (typeof controller.reconcile !== 'function') {
    throw new TypeError(`the controller of ${registration.kind} has no reconcile(client, object)`);
  }
}
