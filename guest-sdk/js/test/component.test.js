// src/component.js, the SDK's side of the WIT contract, against stand-ins
// for the host's imports: what crosses the boundary has the contract's
// shapes (BigInt ids and durations, enum strings, `{tag, val}` variants).

import assert from 'node:assert/strict';
import { register } from 'node:module';
import { beforeEach, test } from 'node:test';

register('./hooks.js', import.meta.url);
const stub = await import('./wit-stub.js');
await import('../src/component.js');
const { Action, condition, event, exportController, violation, config, log } = await import('../src/index.js');

beforeEach(() => {
  stub.calls.length = 0;
});

const things = {
  registration: {
    group: 'test.dev',
    kind: 'Thing',
    finalizers: ['test.dev/cleanup'],
    concurrency: 4,
    fullPassIntervalMs: 60_000,
    startupFullPass: true,
    specVersion: 2,
  },
  specSchema: { type: 'object' },
  validate: (spec) => (spec.port > 0 ? [] : [violation('spec.port', 'must be positive')]),
  reconcile(client, thing) {
    client.setConditions([
      condition('Ready', true, { reason: 'Up', liveness: true }),
      condition('Known', null),
    ]);
    client.addEvent(event.warning('Slow', 'took long', { detail: { ms: 3 } }));
    client.addDependency(12);
    client.updateStatus({ seen: thing.meta.generation, owner: client.owner() });
    return Action.unsettled().requeueAfter(250);
  },
  convertSpec(from, spec) {
    if (from === 1) return { ...spec, upgraded: true };
    throw new Error(`no converter from ${from}`);
  },
};

test('describe gives the registration with its durations as BigInt', () => {
  assert.deepEqual(exportController(things).describe(), {
    group: 'test.dev',
    kind: 'Thing',
    finalizers: ['test.dev/cleanup'],
    concurrency: 4,
    owedPassIntervalMs: undefined,
    fullPassIntervalMs: 60000n,
    individualPassIntervalMs: undefined,
    startupFullPass: true,
    maxRetryIntervalMs: undefined,
    specSchemaVersion: 2,
    statusSchemaVersion: 0,
    passDeadlineMs: undefined,
    specSchema: '{"type":"object"}',
    statusSchema: undefined,
    validates: true,
    migrates: true,
  });
});

test('a pass reads the WIT object and writes WIT values', () => {
  let seen;
  const controller = exportController({
    ...things,
    reconcile(client, thing) {
      seen = thing;
      return things.reconcile(client, thing);
    },
  });
  const result = controller.reconcile(stub.witObject(), stub.controllerClient());
  assert.deepEqual(result, { verdict: { tag: 'unsettled' }, requeueAfterMs: 250n });
  assert.equal(seen.meta.id, 1);
  assert.equal(seen.meta.generation, 3);
  assert.equal(seen.meta.observedGeneration, 2);
  assert.equal(seen.meta.deleting, false);
  assert.deepEqual(seen.spec, { port: 8080 });
  assert.equal(seen.status, null);
  // The kind is the controller's own; absent lists are empty.
  assert.equal(seen.meta.kind, 'Thing');
  assert.equal(seen.meta.group, 'test.dev');
  assert.deepEqual(seen.meta.finalizers, []);
  assert.deepEqual(seen.meta.labels, { tier: 'web' });
  assert.equal(seen.meta.condition('Ready').status, false);
  assert.equal(seen.meta.condition('Ready').unconfirmed, true);

  const [, conditions] = stub.calls.find(([name]) => name === 'set-conditions');
  assert.deepEqual(conditions[0], {
    type: 'Ready',
    status: 'is-true',
    reason: 'Up',
    message: '',
    liveness: true,
    unconfirmed: false,
    transitionedAtMs: 0n,
    updatedAtMs: 0n,
  });
  assert.equal(conditions[1].status, 'unknown');
  assert.deepEqual(stub.calls.find(([name]) => name === 'add-event')[1], {
    category: '',
    eventType: 'warning',
    reason: 'Slow',
    message: 'took long',
    detail: '{"ms":3}',
  });
  assert.deepEqual(stub.calls.find(([name]) => name === 'add-dependency'), ['add-dependency', 12n]);
  assert.deepEqual(JSON.parse(stub.calls.find(([name]) => name === 'update-status')[1]), {
    seen: 3,
    owner: { id: 4, group: 'g', kind: 'K' },
  });
});

test('a host error is a BeehiveError with the WIT case as its code', () => {
  stub.next.error = { tag: 'other', val: 'not granted: read on Secret.vault.dev' };
  let caught;
  const controller = exportController({
    ...things,
    reconcile(client) {
      try {
        client.kind('vault.dev', 'Secret').get(5);
      } catch (error) {
        caught = error;
      }
    },
  });
  assert.deepEqual(controller.reconcile(stub.witObject(), stub.controllerClient()), {
    verdict: { tag: 'settled' },
    requeueAfterMs: undefined,
  });
  assert.equal(caught.code, 'not-granted');
  assert.equal(caught.kind, 'Secret.vault.dev');
  assert.equal(caught.verb, 'read');
  assert.deepEqual(stub.calls.find(([name]) => name === 'get'), ['get', 5n]);
});

test('a throw, sync or async, is a failed verdict, never a trap', async () => {
  const sync = exportController({
    ...things,
    reconcile() {
      throw new RangeError('out of range');
    },
  });
  const thrown = sync.reconcile(stub.witObject(), stub.controllerClient()).verdict;
  assert.equal(thrown.tag, 'failed');
  // The message, then the stack: the host shows the lines after the first
  // as the ReconcileFailed event's detail.
  const [headline, ...stack] = thrown.val.split('\n');
  assert.equal(headline, 'RangeError: out of range');
  assert.ok(stack.some((line) => line.includes('at ')), thrown.val);
  const async = exportController({
    ...things,
    async reconcile() {
      await null;
      throw 'a string';
    },
  });
  const result = await async.reconcile(stub.witObject(), stub.controllerClient());
  assert.deepEqual(result.verdict, { tag: 'failed', val: 'thrown "a string"' });
});

test('the client is closed once the pass returns', () => {
  let kept;
  exportController({
    ...things,
    reconcile(client) {
      kept = client;
    },
  }).reconcile(stub.witObject(), stub.controllerClient());
  assert.throws(() => kept.updateStatus({}), { code: 'client-closed' });
});

test('lists page on until the host says there is no more', () => {
  let listed;
  exportController({
    ...things,
    reconcile(client) {
      listed = client.kind('test.dev', 'Thing').list('tier=web');
    },
  }).reconcile(stub.witObject(), stub.controllerClient());
  assert.deepEqual(
    listed.map((o) => o.meta.id),
    [1, 2, 3],
  );
  assert.deepEqual(
    stub.calls.filter(([name]) => name === 'list'),
    [
      ['list', undefined, 500, 'tier=web'],
      ['list', 2n, 500, 'tier=web'],
    ],
  );
});

test('validate and the converters cross as JSON text', () => {
  const schema = exportController(things);
  assert.deepEqual(schema.validate('{"port":0}'), [{ path: 'spec.port', message: 'must be positive' }]);
  assert.deepEqual(schema.validate('{"port":1}'), []);
  const migrator = exportController(things);
  assert.equal(migrator.convertSpec(1, '{"a":1}'), '{"a":1,"upgraded":true}');
  // An Error would trap; a `payload` is the result's error.
  assert.throws(() => migrator.convertSpec(0, '{}'), (thrown) => {
    assert.equal(thrown.payload, 'Error: no converter from 0');
    return true;
  });
  assert.throws(() => migrator.convertStatus(0, '{}'), (thrown) => /no converter from status version 0/.test(thrown.payload));
});

test('config and log reach the host', () => {
  stub.configValues.set('token', 's3cret');
  assert.equal(config.get('token'), 's3cret');
  assert.equal(config.get('absent'), undefined);
  assert.deepEqual(config.keys(), ['token']);
  log.warn('careful');
  assert.deepEqual(stub.calls.at(-1), ['log', 'warn', 'careful']);
});
