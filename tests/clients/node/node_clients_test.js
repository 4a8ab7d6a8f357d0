#!/usr/bin/env node
// End-to-end checks of a RESP server (pollend, or Redis + RedisBloom) through
// two Node.js clients: node-redis v4 (`redis`) and ioredis v5.
//
// Usage: node node_clients_test.js HOST PORT
//
// Expected replies are Redis 7.0's and RedisBloom 2.4's. Every key starts with
// a random prefix. One line per check, then `N passed, M failed` alone on the
// last line; exit code 1 if any check failed.
'use strict';

const crypto = require('crypto');
const assert = require('assert');
const { createClient, WatchError } = require('redis');
const IORedis = require('ioredis');

if (process.argv.length !== 4) {
  console.error('usage: node node_clients_test.js HOST PORT');
  process.exit(2);
}
const HOST = process.argv[2];
const PORT = Number(process.argv[3]);
const PFX = 'njs' + crypto.randomBytes(4).toString('hex') + ':';
const BLOOM_TYPE = 'MBbloom--';
const CHECK_TIMEOUT_MS = 20000;
const key = (name) => PFX + name;

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

class Skip extends Error {}

// ------------------------------------------------------------------ clients

const opened = [];

async function nodeRedis() {
  const c = createClient({
    socket: { host: HOST, port: PORT, connectTimeout: 5000, reconnectStrategy: false },
  });
  c.on('error', () => {}); // errors surface through the commands' promises
  opened.push(() => c.disconnect().catch(() => {}));
  await c.connect();
  return c;
}

async function ioRedis(extra = {}) {
  const c = new IORedis({
    host: HOST,
    port: PORT,
    lazyConnect: true,
    connectTimeout: 5000,
    commandTimeout: 10000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...extra,
  });
  c.on('error', () => {});
  opened.push(() => c.disconnect());
  await c.connect();
  return c;
}

async function closeAll() {
  while (opened.length) {
    try { await opened.pop()(); } catch (_) { /* closing is best effort */ }
  }
}

async function expectReject(promise, fragment, what) {
  let got;
  try {
    got = await promise;
  } catch (e) {
    const msg = String(e && e.message);
    assert.ok(msg.toLowerCase().includes(fragment.toLowerCase()),
      `${what}: error ${JSON.stringify(msg)} lacks ${JSON.stringify(fragment)}`);
    return e;
  }
  assert.fail(`${what}: no error, got ${JSON.stringify(got)}`);
}

// ------------------------------------------------------------------ node-redis v4

check('node-redis: connect, PING, ECHO', async () => {
  const c = await nodeRedis();
  assert.strictEqual(await c.ping(), 'PONG');
  assert.strictEqual(await c.sendCommand(['ECHO', 'hello pollen']), 'hello pollen');
});

check('node-redis: sendCommand BF.RESERVE/BF.ADD/BF.EXISTS/BF.MADD/BF.MEXISTS', async () => {
  const c = await nodeRedis();
  const k = key('nr-basic');
  assert.strictEqual(await c.sendCommand(['BF.RESERVE', k, '0.001', '1000']), 'OK');
  assert.strictEqual(await c.sendCommand(['BF.ADD', k, 'a']), 1, 'BF.ADD new');
  assert.strictEqual(await c.sendCommand(['BF.ADD', k, 'a']), 0, 'BF.ADD again');
  assert.strictEqual(await c.sendCommand(['BF.EXISTS', k, 'a']), 1, 'BF.EXISTS added');
  assert.strictEqual(await c.sendCommand(['BF.EXISTS', k, 'zz']), 0, 'BF.EXISTS other');
  assert.deepStrictEqual(await c.sendCommand(['BF.MADD', k, 'a', 'b', 'c']), [0, 1, 1], 'BF.MADD');
  assert.deepStrictEqual(await c.sendCommand(['BF.MEXISTS', k, 'b', 'q']), [1, 0], 'BF.MEXISTS');
  await expectReject(c.sendCommand(['BF.RESERVE', k, '0.01', '10']), 'item exists', 'BF.RESERVE twice');
});

check('node-redis: the bundled bf.* commands (@redis/bloom)', async () => {
  const c = await nodeRedis();
  const k = key('nr-bf');
  assert.strictEqual(await c.bf.reserve(k, 0.01, 1000), 'OK');
  assert.strictEqual(await c.bf.add(k, 'x'), true, 'bf.add new');
  assert.strictEqual(await c.bf.add(k, 'x'), false, 'bf.add again');
  assert.deepStrictEqual(await c.bf.mAdd(k, ['y', 'z']), [true, true], 'bf.mAdd');
  assert.strictEqual(await c.bf.exists(k, 'y'), true, 'bf.exists');
  assert.deepStrictEqual(await c.bf.mExists(k, ['z', 'nope']), [true, false], 'bf.mExists');
  const info = await c.bf.info(k);
  assert.strictEqual(info.capacity, 1000, 'bf.info capacity');
  assert.strictEqual(info.numberOfFilters, 1, 'bf.info numberOfFilters');
  assert.strictEqual(info.numberOfInsertedItems, 3, 'bf.info numberOfInsertedItems');
  assert.ok(info.size > 0, 'bf.info size');
  assert.deepStrictEqual(await c.bf.insert(key('nr-bf-ins'), ['p', 'q'], { CAPACITY: 500, ERROR: 0.01 }),
    [true, true], 'bf.insert');
  assert.strictEqual(await c.sendCommand(['BF.CARD', k]), 3, 'BF.CARD');
});

check('node-redis: auto-pipelined sendCommand via Promise.all (500 BF.ADD)', async () => {
  const c = await nodeRedis();
  const k = key('nr-pipe');
  await c.sendCommand(['BF.RESERVE', k, '0.001', '10000']);
  const items = Array.from({ length: 500 }, (_, i) => `item-${i}`);
  const first = await Promise.all(items.map((it) => c.sendCommand(['BF.ADD', k, it])));
  assert.strictEqual(first.length, 500);
  const added = first.reduce((a, b) => a + b, 0);
  assert.ok(added >= 495, `new items answer 1: ${added} of 500`);
  const again = await Promise.all(items.map((it) => c.sendCommand(['BF.ADD', k, it])));
  assert.deepStrictEqual(again, new Array(500).fill(0), 'the same 500 again answer 0');
  const ex = await Promise.all(items.map((it) => c.sendCommand(['BF.EXISTS', k, it])));
  assert.ok(ex.every((v) => v === 1), 'every item exists');
});

check('node-redis: multi().exec()', async () => {
  const c = await nodeRedis();
  const k = key('nr-multi');
  const res = await c.multi()
    .addCommand(['BF.RESERVE', k, '0.001', '1000'])
    .addCommand(['BF.ADD', k, 'a'])
    .addCommand(['BF.MADD', k, 'a', 'b'])
    .addCommand(['BF.EXISTS', k, 'b'])
    .addCommand(['BF.CARD', k])
    .exec();
  assert.deepStrictEqual(res, ['OK', 1, [0, 1], 1, 2]);
});

check('node-redis: multi().exec() with a failing command reports MultiErrorReply', async () => {
  const c = await nodeRedis();
  const k = key('nr-multi-err');
  await c.sendCommand(['BF.RESERVE', k, '0.001', '1000']);
  let err;
  try {
    await c.multi()
      .addCommand(['BF.ADD', k, 'before'])
      .addCommand(['BF.RESERVE', k, '0.01', '10'])
      .addCommand(['BF.ADD', k, 'after'])
      .exec();
  } catch (e) { err = e; }
  assert.ok(err, 'exec() rejected');
  assert.deepStrictEqual(err.errorIndexes, [1], `errorIndexes of ${err && err.message}`);
  assert.strictEqual(err.replies[0], 1);
  assert.ok(String(err.replies[1].message).includes('item exists'), 'the error reply');
  assert.strictEqual(err.replies[2], 1);
  assert.deepStrictEqual(await c.sendCommand(['BF.MEXISTS', k, 'before', 'after']), [1, 1]);
});

check('node-redis: multi() with an unknown command aborts (EXECABORT)', async () => {
  const c = await nodeRedis();
  const k = key('nr-abort');
  await c.sendCommand(['BF.RESERVE', k, '0.001', '1000']);
  await expectReject(
    c.multi().addCommand(['BF.ADD', k, 'queued']).addCommand(['NO.SUCH.COMMAND', k]).exec(),
    'EXECABORT', 'exec() after a queueing error');
  assert.strictEqual(await c.sendCommand(['BF.EXISTS', k, 'queued']), 0, 'nothing applied');
});

check('node-redis: executeIsolated WATCH flow (conflict -> WatchError, none -> commit)', async () => {
  const c = await nodeRedis();
  const other = await nodeRedis();
  const k = key('nr-watch');
  await c.sendCommand(['BF.RESERVE', k, '0.001', '1000']);
  let err;
  try {
    await c.executeIsolated(async (iso) => {
      await iso.watch(k);
      await other.sendCommand(['BF.ADD', k, 'concurrent']);
      return iso.multi().addCommand(['BF.ADD', k, 'from-tx']).exec();
    });
  } catch (e) { err = e; }
  assert.ok(err instanceof WatchError, `want WatchError, got ${err}`);
  assert.strictEqual(await c.sendCommand(['BF.EXISTS', k, 'from-tx']), 0, 'aborted tx applied nothing');
  const ok = await c.executeIsolated(async (iso) => {
    await iso.watch(k);
    return iso.multi().addCommand(['BF.ADD', k, 'from-tx']).exec();
  });
  assert.deepStrictEqual(ok, [1], 'untouched WATCH commits');
});

check('node-redis: keyspace (EXISTS, TYPE, DBSIZE, KEYS, scanIterator MATCH/TYPE)', async () => {
  const c = await nodeRedis();
  const ks = [key('nr-ks:a1'), key('nr-ks:a2'), key('nr-ks:b1')];
  const before = await c.dbSize();
  for (const k of ks) await c.sendCommand(['BF.RESERVE', k, '0.01', '100']);
  assert.strictEqual(await c.dbSize(), before + 3, 'DBSIZE + 3');
  assert.strictEqual(await c.exists([ks[0], ks[2], key('nr-ks:none')]), 2, 'EXISTS');
  assert.strictEqual(await c.type(ks[0]), BLOOM_TYPE, 'TYPE');
  assert.deepStrictEqual((await c.keys(key('nr-ks:*'))).sort(), ks, 'KEYS');
  const seen = [];
  for await (const k of c.scanIterator({ MATCH: key('nr-ks:a*'), TYPE: BLOOM_TYPE, COUNT: 2 })) seen.push(k);
  assert.deepStrictEqual(seen.sort(), ks.slice(0, 2), 'scanIterator');
});

check('node-redis: RESP3', async () => {
  const v = require('redis/package.json').version;
  if (/^4\./.test(v)) throw new Skip(`node-redis ${v} speaks RESP2 only (RESP3 came in node-redis v5)`);
  assert.fail('unexpected node-redis major version ' + v);
});

// ------------------------------------------------------------------ ioredis v5

check('ioredis: connect (INFO ready check), PING', async () => {
  const c = await ioRedis();
  assert.strictEqual(c.status, 'ready');
  assert.strictEqual(await c.ping(), 'PONG');
});

check('ioredis: call BF.ADD/BF.EXISTS/BF.MADD/BF.INFO', async () => {
  const c = await ioRedis();
  const k = key('io-basic');
  assert.strictEqual(await c.call('BF.RESERVE', k, '0.001', '1000'), 'OK');
  assert.strictEqual(await c.call('BF.ADD', k, 'a'), 1);
  assert.strictEqual(await c.call('BF.ADD', k, 'a'), 0);
  assert.strictEqual(await c.call('BF.EXISTS', k, 'a'), 1);
  assert.deepStrictEqual(await c.call('BF.MADD', k, 'b', 'c'), [1, 1]);
  const info = await c.call('BF.INFO', k);
  assert.strictEqual(info[0], 'Capacity');
  assert.strictEqual(info[1], 1000);
  assert.deepStrictEqual(await c.call('BF.INFO', k, 'ITEMS'), [3]);
  await expectReject(c.call('BF.INFO', key('io-missing')), 'not found', 'BF.INFO of a missing filter');
});

check('ioredis: pipeline().exec() of 1000 BF.ADD', async () => {
  const c = await ioRedis();
  const k = key('io-pipe');
  await c.call('BF.RESERVE', k, '0.001', '20000');
  const p = c.pipeline();
  for (let i = 0; i < 1000; i++) p.call('BF.ADD', k, `u${i}`);
  const res = await p.exec();
  assert.strictEqual(res.length, 1000);
  assert.ok(res.every(([e]) => e === null), 'no errors');
  const added = res.reduce((a, [, v]) => a + v, 0);
  assert.ok(added >= 995, `new items answer 1: ${added}`);
  const p2 = c.pipeline();
  p2.call('BF.EXISTS', k, 'u7');
  p2.call('BF.ADD', k);
  p2.call('BF.CARD', k);
  const r2 = await p2.exec();
  assert.deepStrictEqual(r2[0], [null, 1]);
  assert.ok(r2[1][0] && /wrong number of arguments/.test(r2[1][0].message), 'error in a pipeline slot');
  assert.ok(Math.abs(r2[2][1] - added) <= 50, `BF.CARD near ${added}: ${r2[2][1]}`);
});

check('ioredis: multi().exec()', async () => {
  const c = await ioRedis();
  const k = key('io-multi');
  const res = await c.multi()
    .call('BF.RESERVE', k, '0.001', '1000')
    .call('BF.ADD', k, 'a')
    .call('BF.MADD', k, 'a', 'b')
    .call('BF.MEXISTS', k, 'a', 'zz')
    .exec();
  assert.deepStrictEqual(res, [[null, 'OK'], [null, 1], [null, [0, 1]], [null, [1, 0]]]);
});

check('ioredis: WATCH + concurrent change -> exec() resolves null', async () => {
  const c = await ioRedis();
  const other = await ioRedis();
  const k = key('io-watch');
  await c.call('BF.RESERVE', k, '0.001', '1000');
  assert.strictEqual(await c.watch(k), 'OK');
  await other.call('BF.ADD', k, 'concurrent');
  const res = await c.multi().call('BF.ADD', k, 'from-tx').exec();
  assert.strictEqual(res, null, 'aborted EXEC');
  assert.strictEqual(await c.call('BF.EXISTS', k, 'from-tx'), 0);
  assert.strictEqual(await c.watch(k), 'OK');
  assert.strictEqual(await c.unwatch(), 'OK');
  await other.call('BF.ADD', k, 'concurrent-2');
  assert.deepStrictEqual(await c.multi().call('BF.ADD', k, 'from-tx').exec(), [[null, 1]], 'after UNWATCH');
});

check('ioredis: scanStream({match, type, count})', async () => {
  const c = await ioRedis();
  const ks = [key('io-ks:a1'), key('io-ks:a2'), key('io-ks:a3'), key('io-ks:b1')];
  for (const k of ks) await c.call('BF.RESERVE', k, '0.01', '100');
  const scan = (opts) => new Promise((resolve, reject) => {
    const out = [];
    const s = c.scanStream(opts);
    s.on('data', (batch) => out.push(...batch));
    s.on('end', () => resolve(out.sort()));
    s.on('error', reject);
  });
  assert.deepStrictEqual(await scan({ match: key('io-ks:a*'), count: 2 }), ks.slice(0, 3), 'MATCH a*');
  assert.deepStrictEqual(await scan({ match: key('io-ks:*'), type: BLOOM_TYPE, count: 100 }), ks, 'TYPE');
  assert.deepStrictEqual(await scan({ match: key('io-ks:*'), type: 'hash' }), [], 'TYPE hash');
  assert.strictEqual(await c.type(ks[3]), BLOOM_TYPE, 'TYPE');
  assert.strictEqual(await c.exists(ks[0], key('io-ks:none')), 1, 'EXISTS');
});

check('ioredis: RESP3', async () => {
  const v = require('ioredis/package.json').version;
  throw new Skip(`ioredis ${v} speaks RESP2 only (it has no RESP3 option)`);
});

// ------------------------------------------------------------------ runner

function withTimeout(promise, ms) {
  let t;
  const timer = new Promise((_, reject) => {
    t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timer]).finally(() => clearTimeout(t));
}

async function main() {
  console.log(`node-redis ${require('redis/package.json').version}, ioredis ${require('ioredis/package.json').version}` +
    ` against ${HOST}:${PORT} (key prefix ${PFX})`);
  let passed = 0;
  let failed = 0;
  for (const { name, fn } of checks) {
    try {
      await withTimeout(fn(), CHECK_TIMEOUT_MS);
      passed++;
      console.log(`ok   ${name}`);
    } catch (e) {
      if (e instanceof Skip) {
        console.log(`skip ${name}: ${e.message}`);
      } else {
        failed++;
        const msg = String((e && e.message) || e).split('\n').slice(0, 4).join(' | ');
        console.log(`FAIL ${name}: ${e && e.constructor ? e.constructor.name : 'Error'}: ${msg}`);
      }
    } finally {
      await withTimeout(closeAll(), 5000).catch(() => {});
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL runner: ${e && e.stack}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
});
