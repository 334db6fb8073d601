// Lines for the host's log, tagged there with the plugin and the object of
// the pass. Under test they are kept by the fake (`logLines()`).

import { host } from './binding.js';

const emit = (level) => (message) => host.log(level, String(message));

/** Logs at trace level. */
export const trace = emit('trace');
/** Logs at debug level. */
export const debug = emit('debug');
/** Logs at info level. */
export const info = emit('info');
/** Logs at warn level. */
export const warn = emit('warn');
/** Logs at error level. */
export const error = emit('error');
