// Named values the operator gives the plugin in its policy file
// (`[config]`): settings, or secrets from the host's environment or a file.

import { host } from './binding.js';

/** The value of `key`, or undefined when the operator gave none. */
export function get(key) {
  return host.configGet(key) ?? undefined;
}

/** Every key the operator gave, sorted. */
export function keys() {
  return host.configKeys();
}
