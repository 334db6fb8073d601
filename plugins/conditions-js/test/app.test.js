// The example's reconcile and rules, against the SDK's fake client.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Action } from 'beehive-guest';
import { FakeClient } from 'beehive-guest/fake';

import { services } from '../app.js';
import { servicesV2 } from '../app_v2.js';

function pass(spec, controller = services) {
  const fake = new FakeClient();
  const action = fake.run(controller, { spec, meta: { name: 'web' } });
  assert.deepEqual(action, Action.settled());
  return fake;
}

test('a valid enabled service is configured and serving', () => {
  const fake = pass({ port: 8080 });
  assert.equal(fake.conditions.get('Configured').status, true);
  assert.equal(fake.conditions.get('Configured').liveness, false, 'durable');
  assert.equal(fake.conditions.get('Serving').status, true);
  assert.equal(fake.conditions.get('Serving').liveness, true, 'alive in this process only');
  assert.deepEqual(fake.status, { endpoint: 'http://web:8080' });
});

test('an invalid port is reported, not failed', () => {
  const fake = pass({ port: 0 });
  assert.equal(fake.conditions.get('Configured').reason, 'InvalidPort');
  assert.equal(fake.conditions.get('Serving').reason, 'NotConfigured');
  assert.deepEqual(fake.status, { endpoint: null });
});

test('a disabled service does not serve', () => {
  const fake = pass({ port: 8080, enabled: false });
  assert.equal(fake.conditions.get('Serving').reason, 'Disabled');
});

test('validate refuses a port out of range', () => {
  assert.deepEqual(services.validate({ port: 8080 }), []);
  assert.deepEqual(services.validate({ port: 70000 }), [
    { path: 'spec.port', message: '70000 is outside 1-65535' },
  ]);
});

test('release 2 names itself and upgrades version-0 specs', () => {
  const fake = pass({ port: 8080, enabled: true }, servicesV2);
  assert.match(fake.conditions.get('Serving').message, /\(release 2\)/);
  assert.deepEqual(servicesV2.convertSpec(0, { port: 1 }), { enabled: true, port: 1 });
  assert.throws(() => servicesV2.convertSpec(7, {}), /no converter/);
});
