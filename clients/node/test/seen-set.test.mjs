// SeenSet against real pollend clusters: answers, batching and coalescing,
// WAIT, failover (trusted before sending, "new" after: a black-hole node and
// a SIGSTOPped pollend mid-batch), no node left, closing, arguments.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createRequire } from 'node:module';

import Redis from 'ioredis';

import { NoNodeAvailable, ReplyError, SeenSet } from 'pollen-seen-set';
import { Cluster, freePort } from './cluster.mjs';

const keys = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

async function direct(port, ...args) {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return await r.call(...args);
  } finally {
    r.disconnect();
  }
}

async function maddCalls(port) {
  const info = await direct(port, 'INFO', 'commandstats');
  const m = /cmdstat_bf\.madd:calls=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

// A "node" that takes each command and dies before answering: the request
// was sent, and whether it landed cannot be known.
async function blackHole() {
  const sockets = new Set();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.once('data', () => s.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(resolve);
    }),
  };
}

describe('SeenSet on a healthy cluster', () => {
  let cluster;
  before(async () => { cluster = await Cluster.start(3); });
  after(async () => { await cluster.close(); });

  test('answers per key, in batches, and waits for replicas', async () => {
    // A generous WAIT timeout: a WAIT cut short by a loaded machine is not what is tested.
    const s = new SeenSet({ urls: cluster.urls, filter: 'urls', batchSize: 3, waitReplicas: 2, waitTimeoutMs: 20000 });
    try {
      await s.reserve(0.001, 100000);
      await s.reserve(0.001, 100000); // exists: left as it is
      const ks = keys('k', 10);
      assert.deepEqual(await s.seenAdd(ks), Array(10).fill(false));
      assert.equal(s.requests, 4); // 3 + 3 + 3 + 1
      assert.deepEqual(await s.seenAdd([...ks, 'new']), [...Array(10).fill(true), false]);
      assert.deepEqual(await s.seen(['k0', 'never']), [true, false]);
      assert.equal(s.shortWaits, 0);
      assert.equal(s.seenKeys, 10);
      assert.equal(s.newKeys, 11);
      // WAIT 2 returned: both other nodes hold every key now, gossip or not.
      for (const port of cluster.respPorts.slice(1)) {
        assert.deepEqual(await direct(port, 'BF.MEXISTS', 'urls', ...ks), Array(10).fill(1));
      }
      // delete(): the filter is gone (here at once), and a later add makes it anew, empty.
      assert.equal(await s.delete(), true);
      assert.equal(await direct(cluster.respPorts[0], 'EXISTS', 'urls'), 0);
      assert.equal(await s.delete(), false);
      assert.deepEqual(await s.seenAdd(['k0']), [false]);
    } finally {
      await s.close();
    }
  });

  test('an error reply rejects the call and is not a failover', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'bad' });
    try {
      await assert.rejects(s.reserve(2.0, 100), ReplyError); // RedisBloom's range error
      await direct(cluster.respPorts[0], 'BF.RESERVE', 'tiny', '0.01', '2', 'NONSCALING');
      const tiny = new SeenSet({ urls: cluster.urls, filter: 'tiny' });
      await assert.rejects(tiny.seenAdd(keys('t', 50)), /full/);
      await tiny.close();
      assert.equal(s.failovers + tiny.failovers, 0);
    } finally {
      await s.close();
    }
  });

  test('concurrent calls in one turn coalesce into one BF.MADD', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'coalesce' });
    try {
      await s.reserve(0.001, 100000);
      const before = await maddCalls(cluster.respPorts[0]);
      // 200 callers in the same turn, one key each, the last ten repeating the first ten.
      const calls = [];
      for (let i = 0; i < 200; i++) calls.push(s.seenAdd([`c${i < 190 ? i : i - 190}`]));
      const answers = (await Promise.all(calls)).map(([a]) => a);
      assert.deepEqual(answers, [...Array(190).fill(false), ...Array(10).fill(true)]);
      assert.equal(s.requests, 1);
      assert.equal(await maddCalls(cluster.respPorts[0]) - before, 1);
      // The same key from many callers at once: exactly one hears "new".
      const same = await Promise.all(Array.from({ length: 20 }, () => s.seenAdd(['once'])));
      assert.equal(same.filter(([a]) => a === false).length, 1);
    } finally {
      await s.close();
    }
  });

  test('batchSize bounds each command; calls made meanwhile join the next batch', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'bounded', batchSize: 50 });
    try {
      const first = s.seenAdd(keys('b', 120)); // 50 + 50 + 20
      const more = Array.from({ length: 30 }, (_, i) => s.seenAdd([`m${i}`, `b${i}`]));
      assert.deepEqual(await first, Array(120).fill(false));
      for (const a of await Promise.all(more)) assert.deepEqual(a, [false, true]);
      // 180 keys in batches of at most 50: four commands, the 20 and the 60 sharing one batch boundary.
      assert.ok(s.requests >= 4 && s.requests <= 5, `requests: ${s.requests}`);
      // Mixed kinds keep their order: an add then a test of the same key.
      const [added, tested] = await Promise.all([s.seenAdd(['order']), s.seen(['order'])]);
      assert.deepEqual([added, tested], [[false], [true]]);
    } finally {
      await s.close();
    }
  });

  test('keys may be Buffers; an empty call sends nothing', async () => {
    const s = new SeenSet({ urls: cluster.urls[0].replace('redis://', ''), filter: 'bin' });
    try {
      const k = Buffer.from([0, 255, 10, 13, 32]);
      assert.deepEqual(await s.seenAdd([k, 'text']), [false, false]);
      assert.deepEqual(await s.seenAdd(new Set([k])), [true]);
      assert.deepEqual(await s.seenAdd([]), []);
      assert.equal(s.requests, 2);
    } finally {
      await s.close();
    }
  });

  test('a node that refuses is skipped and its answers trusted; home is tried again', async () => {
    const dead = `redis://127.0.0.1:${await freePort()}`; // nobody listens
    const s = new SeenSet({ urls: [dead, ...cluster.urls], filter: 'refused', homeRetryMs: 3600000 });
    try {
      assert.deepEqual(await s.seenAdd(['a', 'b']), [false, false]);
      assert.deepEqual(await s.seenAdd(['a']), [true]);
      assert.equal(s.failovers, 1);
      assert.equal(s.unvouched, 0);
      assert.equal(s.node, cluster.urls[0]);
    } finally {
      await s.close();
    }
    const again = new SeenSet({ urls: [dead, ...cluster.urls], filter: 'refused', homeRetryMs: 0 });
    try {
      assert.deepEqual(await again.seenAdd(['a']), [true]);
      assert.deepEqual(await again.seenAdd(['a']), [true]);
      assert.equal(again.failovers, 2); // home tried before each call, and refused
    } finally {
      await again.close();
    }
  });

  test('a node that dies after taking the request: its keys answer "new" and are added at the next', async () => {
    const hole = await blackHole();
    const s = new SeenSet({ urls: [hole.url, ...cluster.urls], filter: 'hole', homeRetryMs: 3600000 });
    try {
      const ks = keys('h', 20);
      await direct(cluster.respPorts[0], 'BF.MADD', 'hole', ...ks.slice(0, 10)); // seen before, elsewhere
      // The first node took the request: the answers cannot be vouched for.
      assert.deepEqual(await s.seenAdd(ks), Array(20).fill(false));
      assert.equal(s.unvouched, 20);
      assert.equal(s.failovers, 1);
      assert.equal(s.node, cluster.urls[0]);
      assert.equal(s.seenKeys, 0);
      // ... and they were added at the next node.
      assert.deepEqual(await direct(cluster.respPorts[0], 'BF.MEXISTS', 'hole', ...ks), Array(20).fill(1));
      assert.deepEqual(await s.seenAdd(ks), Array(20).fill(true));
      // A test (BF.MEXISTS) adds nothing: its answers are trusted either way.
      const t = new SeenSet({ urls: [hole.url, ...cluster.urls], filter: 'hole' });
      assert.deepEqual(await t.seen(['h0', 'nope']), [true, false]);
      await t.close();
    } finally {
      await s.close();
      await hole.close();
    }
  });

  test('arguments are checked', async () => {
    assert.throws(() => new SeenSet({ urls: [], filter: 'f' }), TypeError);
    assert.throws(() => new SeenSet({ urls: cluster.urls }), TypeError);
    assert.throws(() => new SeenSet({ urls: cluster.urls, filter: 'f', batchSize: 0 }), RangeError);
    assert.throws(() => new SeenSet({ urls: cluster.urls, filter: 'f', waitReplicas: -1 }), RangeError);
    const s = new SeenSet({ urls: cluster.urls, filter: 'f' });
    await assert.rejects(s.seenAdd('not-an-array'), TypeError);
    await assert.rejects(s.seenAdd([1, 2]), TypeError);
    await s.close();
  });

  test('close waits for the calls made, then later calls reject', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'closing', batchSize: 10 });
    const pending = s.seenAdd(keys('x', 100));
    await s.close();
    assert.deepEqual(await pending, Array(100).fill(false));
    await assert.rejects(s.seenAdd(['y']), /closed/);
    await assert.rejects(s.reserve(0.01, 10), /closed/);
  });

  test('the package loads as CommonJS too, with the same classes', () => {
    const require = createRequire(import.meta.url);
    const cjs = require('pollen-seen-set');
    assert.equal(cjs.SeenSet, SeenSet);
    assert.equal(typeof cjs.withSeenSet, 'function');
  });
});

describe('SeenSet when nodes fail', () => {
  test('a node stopped mid-batch: its keys answer "new", the next node takes them', async () => {
    const cluster = await Cluster.start(3);
    try {
      const s = new SeenSet({ urls: cluster.urls, filter: 'stopped', timeoutMs: 1000, homeRetryMs: 3600000 });
      await s.reserve(0.001, 100000);
      const ks = keys('s', 30);
      assert.deepEqual(await s.seenAdd(ks), Array(30).fill(false));
      await cluster.pause(0); // keeps its connection open and answers nothing
      const t0 = Date.now();
      assert.deepEqual(await s.seenAdd([...ks, 'fresh']), Array(31).fill(false));
      assert.ok(Date.now() - t0 < 10000);
      assert.equal(s.unvouched, 31);
      assert.equal(s.failovers, 1);
      assert.equal(s.node, cluster.urls[1]);
      // The next node holds them now, and says so.
      assert.deepEqual(await s.seenAdd([...ks, 'fresh']), Array(31).fill(true));
      cluster.resume(0);
      await s.close();
    } finally {
      await cluster.close();
    }
  });

  test('a node killed between calls loses nothing with WAIT, and no node left rejects', async () => {
    const cluster = await Cluster.start(3);
    try {
      // WAIT 2: both other nodes hold every key, whichever the client moves to.
      const s = new SeenSet({ urls: cluster.urls, filter: 'killed', waitReplicas: 2, waitTimeoutMs: 20000 });
      const ks = keys('url-', 50);
      assert.deepEqual(await s.seenAdd(ks), Array(50).fill(false));
      await cluster.kill(0); // the node in use, its connection idle
      assert.deepEqual(await s.seenAdd([...ks, 'fresh']), [...Array(50).fill(true), false]);
      assert.equal(s.failovers, 1);
      assert.equal(s.unvouched, 0); // the request was never sent to the dead node
      assert.equal(s.node, cluster.urls[1]);
      assert.equal(s.shortWaits, 1); // after the kill one peer is left for WAIT 2
      await cluster.kill(1);
      await cluster.kill(2);
      const a = s.seenAdd(['x']);
      const b = s.seenAdd(['y']); // in the same batch: rejected alike
      await assert.rejects(a, NoNodeAvailable);
      await assert.rejects(b, NoNodeAvailable);
      await s.close();
    } finally {
      await cluster.close();
    }
  });
});
