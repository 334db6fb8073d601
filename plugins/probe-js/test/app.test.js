// The probe against the SDK's fake client and its HTTP stubs.

import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

import { Action } from 'beehive-guest';
import { FakeClient, reset, sentRequests, setConfig, stubHttp } from 'beehive-guest/fake';

import { probes } from '../app.js';

beforeEach(reset);

test('a reachable URL is recorded with its token sent', async () => {
  stubHttp('GET', 'http://svc:8080/health', new Response('ok', { status: 200 }));
  setConfig('token', 't0ken');
  const fake = new FakeClient();
  const action = await fake.run(probes, { spec: { url: 'http://svc:8080/health', intervalMs: 200 } });
  assert.deepEqual(action, Action.settled().requeueAfter(200));
  assert.deepEqual(fake.status, { state: 'reachable', statusCode: 200 });
  assert.equal(sentRequests()[0].headers.get('authorization'), 'Bearer t0ken');
  assert.equal(fake.events[0].reason, 'Reachable');
});

test('an ungranted URL is unreachable, not a failed pass', async () => {
  const fake = new FakeClient();
  const action = await fake.run(probes, { spec: { url: 'http://elsewhere/' } });
  assert.equal(action.verdict, 'settled');
  assert.equal(fake.status.state, 'unreachable');
  assert.equal(fake.events[0].reason, 'ProbeFailed');
});

test('a throw is a backoff carrying the error', async () => {
  const fake = new FakeClient();
  const action = await fake.run(probes, { spec: { fail: 'asked to fail' } });
  assert.deepEqual(action, Action.backoff('TypeError: asked to fail'));
});
