// The `{{name}}` plugin against the SDK's fake host, under node --test.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Action } from 'beehive-guest';
import { FakeClient } from 'beehive-guest/fake';

import { {{controller}} } from '../app.js';

test('replicas are reported ready', () => {
  const fake = new FakeClient();
  const action = fake.run({{controller}}, { spec: { replicas: 3 }, meta: { name: 'web' } });
  assert.deepEqual(action, Action.settled());
  const ready = fake.conditions.get('Ready');
  assert.deepEqual([ready.status, ready.message], [true, '3 of 3 ready']);
  assert.deepEqual(fake.status, { ready: 3 });
});

test('no replicas is not ready', () => {
  const fake = new FakeClient();
  fake.run({{controller}}, { spec: { replicas: 0 } });
  assert.equal(fake.conditions.get('Ready').reason, 'ScaledToZero');
});
