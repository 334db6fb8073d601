// The next release of the JavaScript `conditions` example, to hot-swap in:
// the same controller, with a Serving message that names its release, and a
// spec schema version 1 in which `enabled` is explicit. Specs stored at
// version 0 are upgraded when the host reads them (`enabled` defaults to
// true), so its passes only ever see the new shape.

import { exportController } from 'beehive-guest';

import { services } from './app.js';

export const servicesV2 = {
  ...services,
  registration: { ...services.registration, specVersion: 1 },
  specSchema: { ...services.specSchema, required: ['port', 'enabled'] },
  servingMessage: (port) => `listening on :${port} (release 2)`,

  convertSpec(fromVersion, spec) {
    if (fromVersion === 0) return { enabled: true, ...spec };
    throw new Error(`no converter from spec version ${fromVersion}`);
  },
};

export const controller = exportController(servicesV2);
