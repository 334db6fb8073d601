// Outgoing HTTP, reaching only the hosts the operator's policy grants
// (`[http] allow`). Inside a component it is the engine's `fetch`, over
// wasi:http; under test, the fake's stubs answer (`stubHttp`), and an
// unstubbed request fails as a denied one does.

import { host } from './binding.js';

/** `fetch(input, init)`, as the platform's, through the host's grants. */
export function fetch(input, init) {
  return host.fetch(input, init);
}
