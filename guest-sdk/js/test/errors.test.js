import assert from 'node:assert/strict';
import { test } from 'node:test';

import { BeehiveError, fromHost, hostCall } from '../src/errors.js';

test('a WIT error becomes a BeehiveError with its case as the code', () => {
  const error = fromHost({ tag: 'not-found', val: 'not found: Thing 4' });
  assert.ok(error instanceof BeehiveError);
  assert.equal(error.code, 'not-found');
  assert.equal(error.message, 'not found: Thing 4');
  assert.equal(fromHost({ tag: 'invalid-name' }).message, 'invalid-name');
  assert.equal(fromHost({ tag: 'reconcile-returned' }).code, 'client-closed');
  assert.deepEqual(fromHost({ tag: 'dependency-cycle', val: ['a', 'b', 'a'] }).cycle, ['a', 'b', 'a']);
});

test('a store denial reads as not-granted with its kind and verb', () => {
  const denied = fromHost({ tag: 'other', val: 'not granted: write on Widget.example.dev (policy w.toml)' });
  assert.equal(denied.code, 'not-granted');
  assert.equal(denied.kind, 'Widget.example.dev');
  assert.equal(denied.verb, 'write');
  for (const val of ['not granted: fly on X.y', 'not granted: read on ', 'something else']) {
    assert.equal(fromHost({ tag: 'other', val }).code, 'other', val);
  }
});

test('hostCall converts payload errors and passes others through', () => {
  assert.equal(hostCall(() => 3), 3);
  assert.throws(
    () => hostCall(() => { throw Object.assign(new Error('x'), { payload: { tag: 'stopped' } }); }),
    { code: 'stopped' },
  );
  assert.throws(() => hostCall(() => { throw new TypeError('plain'); }), TypeError);
});
