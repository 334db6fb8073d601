// The fake client a plugin's tests run against.

import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';

import { Action, Meta, condition, config, exportController, http, log } from '../src/index.js';
import { FakeClient, grantMatches, logLines, reset, sentRequests, setConfig, stubHttp } from '../src/fake.js';

beforeEach(reset);

const registration = { group: 'example.dev', kind: 'Owner' };

test('kind clients create, find, update, list and delete in memory', () => {
  const fake = new FakeClient();
  const action = fake.run({
    registration,
    reconcile(client, owner) {
      const children = client.kind('example.dev', 'Child');
      const { object, created } = children.getOrCreate('a', { n: 1 }, { owner: owner.meta.id });
      assert.equal(created, true);
      assert.equal(children.getOrCreate('a', { n: 9 }).created, false);
      children.create('b', { n: 2 });
      assert.throws(() => children.create('b', {}), { code: 'name-taken' });
      assert.equal(children.update(object.meta.id, { n: 3 }).meta.generation, 2);
      assert.deepEqual(children.list().map((o) => o.spec.n), [3, 2]);
      assert.deepEqual(children.ownedBy(owner.meta.id).map((o) => o.meta.name), ['a']);
      children.deleteByName('b');
      assert.throws(() => children.getByName('b'), { code: 'not-found' });
      client.transaction(() => client.updateStatus({ children: 1 }));
    },
    }, { meta: { id: 100 } });
  assert.deepEqual(action, Action.settled());
  assert.deepEqual(fake.status, { children: 1 });
  assert.equal(fake.commits, 1);
  assert.deepEqual(fake.objects().map((o) => o.meta.name), ['a']);
});

test('a transaction that throws rolls back', () => {
  const fake = new FakeClient();
  const action = fake.run({
    registration,
    reconcile(client) {
      client.transaction(() => {
        throw new Error('half done');
      });
    },
  });
  assert.deepEqual(action, Action.backoff('Error: half done'));
  // The stack travels beside the message, for the event's detail.
  assert.ok(action.trace.includes('half done') && action.trace.includes('at '), action.trace);
  assert.equal(fake.rollbacks, 1);
});

test('store grants are checked as the host checks them', () => {
  assert.ok(grantMatches('*.example.dev', 'Child.example.dev'));
  assert.ok(grantMatches('*.*.dev', 'Child.example.dev'));
  assert.ok(!grantMatches('*.*.example.dev', 'Child.example.dev'));
  const fake = new FakeClient({ storeGrants: { read: ['Child.example.dev'] } });
  fake.run({
    registration,
    reconcile(client) {
      client.kind('example.dev', 'Owner').create('self', {});
      assert.throws(() => client.kind('example.dev', 'Child').create('x', {}), {
        code: 'not-granted',
        verb: 'write',
      });
      assert.deepEqual(client.kind('example.dev', 'Child').list(), []);
    },
  });
  assert.deepEqual(fake.denials, [{ kind: 'Child.example.dev', verb: 'write' }]);
});

test('conditions of one type twice in one write are refused', () => {
  const fake = new FakeClient();
  const action = fake.run({
    registration,
    reconcile(client) {
      client.setConditions([condition('A', true), condition('A', false)]);
    },
  });
  assert.equal(action.verdict, 'failed');
  assert.match(action.message, /two A conditions/);
  assert.throws(() => condition('A', 'yes'), TypeError);
});

test('what reconcile returns must be an Action', () => {
  const action = new FakeClient().run({ registration, reconcile: () => 'done' });
  assert.deepEqual(action, Action.backoff('reconcile returned "done", not an Action'));
  const policy = new FakeClient().run({
    registration,
    reconcile() {
      throw new Error('x');
    },
    errorPolicy: () => Action.unsettled().requeueAfter(5),
  });
  assert.deepEqual(policy, Action.unsettled().requeueAfter(5));
  assert.throws(() => Action.settled().requeueAfter(-1), RangeError);
});

test('config, log and http go to the test host', async () => {
  setConfig('region', 'eu');
  assert.equal(config.get('region'), 'eu');
  assert.deepEqual(config.keys(), ['region']);
  log.info('hello');
  assert.deepEqual(logLines(), [{ level: 'info', message: 'hello' }]);
  stubHttp('get', 'http://api.test/v1', new Response('{"ok":true}', { status: 200 }));
  const answer = await http.fetch('http://api.test/v1');
  assert.deepEqual(await answer.json(), { ok: true });
  assert.equal(sentRequests().length, 1);
  await assert.rejects(http.fetch('http://other.test/'), /not granted/);
});

test('exports refuse to run outside a component, and need a registration', () => {
  const controller = exportController({ registration, reconcile() {} });
  assert.throws(() => controller.describe(), /not inside a component/);
  assert.throws(() => exportController({ reconcile() {} }), /registration/);
  assert.throws(() => exportController({ registration }), /no reconcile/);
});

test('a finalizer added to an object being deleted is refused as the host does', () => {
  const fake = new FakeClient();
  const holds = {
    registration,
    reconcile(client) {
      client.addFinalizer('example.dev/hold');
    },
  };
  assert.deepEqual(fake.run(holds), Action.settled());
  const refused = fake.run(holds, { meta: { deletionRequestedAtMs: 1 } });
  assert.equal(refused.verdict, 'failed');
  assert.match(refused.message, /Owner\.example\.dev\/test/);
  assert.deepEqual(fake.addedFinalizers, ['example.dev/hold']);
});

test("Meta has every field of the contract's object record", async () => {
  const { readFile } = await import('node:fs/promises');
  const wit = await readFile(new URL('../wit/beehive.wit', import.meta.url), 'utf8');
  const record = wit.match(/record object \{([\s\S]*?)\}/)[1];
  const camel = (name) => name.replace(/-(\w)/g, (_, c) => c.toUpperCase());
  const fields = record
    .split('\n')
    .filter((line) => line.includes(':'))
    .map((line) => camel(line.split(':')[0].trim()))
    .filter((name) => name !== 'spec' && name !== 'status');
  const meta = new Meta({});
  assert.deepEqual(fields.filter((name) => !(name in meta)), []);
});

test('labels are kept, replaced and selected as the host does', () => {
  const fake = new FakeClient();
  const action = fake.run({
    registration,
    reconcile(client) {
      const ports = client.kind('example.dev', 'Port');
      for (const [name, tier] of [['p1', 'web'], ['p2', 'db'], ['p3', undefined]]) {
        ports.create(name, {}, { labels: tier ? { tier } : {} });
      }
      const names = (selector) => ports.list(selector).map((o) => o.meta.name);
      assert.deepEqual(names('tier=web'), ['p1']);
      assert.deepEqual(names('tier in (web,db)'), ['p1', 'p2']);
      assert.deepEqual(names('tier notin (web)'), ['p2', 'p3']);
      assert.deepEqual(names('!tier'), ['p3']);
      assert.deepEqual(names('tier,tier!=web'), ['p2']);
      assert.deepEqual(names(), ['p1', 'p2', 'p3']);
      // No labels keep an object's; given ones replace them.
      ports.createOrUpdate('p1', { n: 1 }, {});
      assert.deepEqual(ports.getByName('p1').meta.labels, { tier: 'web' });
      ports.createOrUpdate('p1', { n: 1 }, { labels: {} });
      assert.deepEqual(names('tier=web'), []);
      assert.throws(() => ports.list('tier in web'), { code: 'invalid-option', message: /position/ });
    },
  });
  assert.deepEqual(action, Action.settled());
});
