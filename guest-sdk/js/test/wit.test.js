// The SDK against the WIT contract it carries: every case of the `error`
// variant has its code, and the component binding calls only methods the
// contract's resources have, and every one of them. A contract change that
// the SDK did not follow fails here, before any build.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { CODES } from '../src/errors.js';

const wit = readFileSync(new URL('../wit/beehive.wit', import.meta.url), 'utf8');
const binding = readFileSync(new URL('../src/component.js', import.meta.url), 'utf8');

/** The body of the WIT item that `head` opens, up to its closing brace. */
function block(head) {
  const start = wit.indexOf(head);
  assert.notEqual(start, -1, `the WIT has ${head}`);
  return wit.slice(start + head.length, wit.indexOf('\n    }', start));
}

const camel = (name) => name.replace(/^%/, '').replace(/-(\w)/g, (_, c) => c.toUpperCase());

/** The names a WIT block declares (`name:` or `name(`), comments aside. */
function names(body, pattern) {
  return body
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('//'))
    .map((line) => line.match(pattern)?.[1])
    .filter(Boolean);
}

test('every case of the error variant has a code', () => {
  const cases = names(block('variant error {'), /^([%\w-]+)[(,]/);
  assert.ok(cases.length > 20, `read ${cases.length} cases`);
  for (const name of cases) {
    const code = name === 'reconcile-returned' ? 'client-closed' : name;
    assert.ok(CODES.includes(code), `no code for the WIT case ${name}`);
  }
  const own = CODES.filter((code) => !cases.includes(code));
  assert.deepEqual(own.sort(), ['client-closed']);
});

for (const [resource, variable] of [
  ['resource controller-client {', 'client'],
  ['resource kind-client {', 'kinds'],
]) {
  test(`the binding covers ${resource.split(' ')[1]} exactly`, () => {
    const methods = names(block(resource), /^([%\w-]+): func/).map(camel);
    const called = new Set([...binding.matchAll(new RegExp(`\\b${variable}\\.(\\w+)\\(`, 'g'))].map((m) => m[1]));
    const unknown = [...called].filter((m) => !methods.includes(m));
    assert.deepEqual(unknown, [], 'calls no method the contract lacks');
    const uncovered = methods.filter((m) => !called.has(m));
    // One condition is written as a list of one; other objects' events and
    // graph edges are the Rust SDK's for now. The rest must be reachable
    // from JavaScript.
    const expected = {
      client: ['setCondition'],
      kinds: ['getOwner', 'listDependencies', 'listDependents', 'listOwned', 'listEvents'],
    };
    assert.deepEqual(uncovered, expected[variable]);
  });
}

test('the registration the binding builds has the record fields', () => {
  const fields = names(block('record registration {'), /^([%\w-]+):/).map(camel);
  const start = binding.indexOf('function registration(');
  const body = binding.slice(start, binding.indexOf('\n}', start));
  const built = [...body.matchAll(/^ {4}(\w+):/gm)].map((m) => m[1]);
  assert.deepEqual(built, fields);
});
