// beehive-js: the world a module is built for, and the errors a
// wrong invocation gets before any build starts.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { worldFor } from '../bin/beehive-js.js';

const command = fileURLToPath(new URL('../bin/beehive-js.js', import.meta.url));

test('every module with a controller is built for one world', () => {
  assert.equal(worldFor(['controller']), 'plugin-with-http');
  // A module written for the first contract may still export these.
  assert.equal(worldFor(['controller', 'schema', 'migrator']), 'plugin-with-http');
  assert.throws(() => worldFor(['schema']), /exports no `controller`/);
});

// A scratch directory removed when the test ends, passed or failed.
function scratch(t) {
  const dir = mkdtempSync(join(tmpdir(), 'beehive-js-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function run(...args) {
  return spawnSync(process.execPath, [command, ...args], { encoding: 'utf8' });
}

test('a wrong invocation is refused with a clear line', (t) => {
  const usage = run('compile', 'app.js');
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /usage: beehive-js build MODULE/);
  const dir = scratch(t);
  const missing = run('build', join(dir, 'absent.js'));
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /absent\.js: not a JavaScript or TypeScript module/);
  writeFileSync(join(dir, 'notes.txt'), 'hello');
  assert.match(run('build', join(dir, 'notes.txt')).stderr, /not a JavaScript or TypeScript module/);
});

test('a module without a controller export is refused before componentize runs', (t) => {
  const dir = scratch(t);
  writeFileSync(join(dir, 'app.js'), 'export const nothing = 1;\n');
  const refused = run('build', join(dir, 'app.js'), '-o', join(dir, 'out.wasm'));
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /exports no `controller`/);
});
