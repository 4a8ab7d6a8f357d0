// withSeenSet on real Crawlee RequestQueues (@crawlee/cheerio, in-memory
// storage) and a real pollend cluster: what the queue answers for requests
// seen elsewhere, what it stores, through every add method; the storage's
// leftovers are not lost; no node left; and two CheerioCrawlers in this
// process on one small local site fetch each page once between them.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { CheerioCrawler, Configuration, log, Request, RequestQueue, RequestQueueV1 } from '@crawlee/cheerio';

import { NoNodeAvailable, SeenSet, requestIdFor, seenSetStats, withSeenSet } from 'pollen-seen-set';
import { Cluster } from './cluster.mjs';

log.setLevel(log.LEVELS.WARNING);

let opened = 0;
async function freshQueue(Kind = RequestQueue) {
  // Its own configuration: its own in-memory storage, as another process would have.
  const config = new Configuration({ persistStorage: false, purgeOnStart: false });
  return Kind.open(`q${++opened}`, { config });
}

async function drain(queue) {
  const urls = [];
  for (let r = await queue.fetchNextRequest(); r; r = await queue.fetchNextRequest()) {
    urls.push(r.url);
    await queue.markRequestHandled(r);
  }
  return urls.sort();
}

const byKey = (result) => Object.fromEntries(result.processedRequests.map((p) => [p.uniqueKey, p]));

describe('withSeenSet', () => {
  let cluster;
  before(async () => { cluster = await Cluster.start(3); });
  after(async () => { await cluster.close(); });

  test('requests seen through another queue are answered present and never stored', async () => {
    const a = new SeenSet({ urls: cluster.urls, filter: 'q:basic' });
    const b = new SeenSet({ urls: cluster.urls.slice(1), filter: 'q:basic' });
    await a.reserve(0.001, 100000);
    try {
      const qa = withSeenSet(await freshQueue(), a);
      const qb = withSeenSet(await freshQueue(), b);
      assert.equal(withSeenSet(qa, a), qa); // idempotent
      assert.throws(() => withSeenSet(qa, b), /another SeenSet/);

      const ra = await qa.addRequests(['http://s.test/1', 'http://s.test/2', { url: 'http://s.test/3#frag' }]);
      assert.deepEqual(ra.processedRequests.map((p) => p.wasAlreadyPresent), [false, false, false]);
      // Gossip: b's node may not hold a's keys yet.
      await waitUntil(async () => (await b.seen(['http://s.test/1', 'http://s.test/2', 'http://s.test/3'])).every(Boolean));

      const rb = byKey(await qb.addRequests(['http://s.test/2', 'http://s.test/3', 'http://s.test/4']));
      assert.deepEqual(rb['http://s.test/2'], {
        uniqueKey: 'http://s.test/2', requestId: requestIdFor('http://s.test/2'), wasAlreadyPresent: true, wasAlreadyHandled: false,
      });
      // The id is the one Crawlee gave it in the queue that stored it.
      assert.equal(rb['http://s.test/3'].requestId, byKey(ra)['http://s.test/3'].requestId);
      assert.equal(rb['http://s.test/4'].wasAlreadyPresent, false);

      // addRequest, one at a time.
      const one = await qb.addRequest({ url: 'http://s.test/1' });
      assert.equal(one.wasAlreadyPresent, true);
      assert.equal(one.uniqueKey, 'http://s.test/1');
      assert.equal((await qb.addRequest(new Request({ url: 'http://s.test/5' }))).wasAlreadyPresent, false);
      assert.equal((await qa.addRequest({ url: 'http://s.test/6' })).wasAlreadyPresent, false);

      // addRequestsBatched: more than one chunk, the rest in the background.
      const urls = Array.from({ length: 60 }, (_, i) => `http://s.test/b${i}`);
      await qa.addRequests(urls.slice(0, 30));
      await waitUntil(async () => (await b.seen(urls.slice(0, 30))).every(Boolean));
      const batched = await qb.addRequestsBatched(urls, { batchSize: 25, waitBetweenBatchesMillis: 0, waitForAllRequestsToBeAdded: true });
      const fresh = batched.addedRequests.filter((p) => !p.wasAlreadyPresent).map((p) => p.uniqueKey);
      assert.deepEqual(fresh.sort(), urls.slice(30).sort());

      assert.deepEqual(await drain(qa), ['http://s.test/1', 'http://s.test/2', 'http://s.test/3#frag', 'http://s.test/6',
        ...urls.slice(0, 30)].sort());
      assert.deepEqual(await drain(qb), ['http://s.test/4', 'http://s.test/5', ...urls.slice(30)].sort());

      const stats = seenSetStats(qb);
      assert.equal(stats.dropped, 3 + 30);
      assert.equal(stats.owed, 0);
      assert.equal(seenSetStats({}), undefined);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("the queue's own cache answers first: a key it knows is not asked of the cluster", async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'q:local' });
    try {
      const q = withSeenSet(await freshQueue(), s);
      await q.addRequests(['http://l.test/a', 'http://l.test/b']);
      const again = await q.addRequests(['http://l.test/a', 'http://l.test/b', 'http://l.test/c']);
      assert.deepEqual(again.processedRequests.map((p) => p.wasAlreadyPresent), [true, true, false]);
      assert.equal(seenSetStats(q).asked, 3);
    } finally {
      await s.close();
    }
  });

  test('RequestQueueV1 is filtered alike', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'q:v1' });
    try {
      const q1 = withSeenSet(await freshQueue(RequestQueueV1), s);
      const q2 = withSeenSet(await freshQueue(RequestQueueV1), s);
      await q1.addRequests(['http://v.test/1']);
      const r = await q2.addRequests(['http://v.test/1', 'http://v.test/2']);
      assert.deepEqual(r.processedRequests.map((p) => p.wasAlreadyPresent), [true, false]);
      assert.deepEqual(await drain(q2), ['http://v.test/2']);
    } finally {
      await s.close();
    }
  });

  test('requests the storage did not take are let in when retried', async () => {
    const s = new SeenSet({ urls: cluster.urls, filter: 'q:owed' });
    // A storage client that refuses the first request of its first batch,
    // as a remote storage may (rate limits): Crawlee retries it.
    let refused = false;
    const stored = [];
    const queue = {
      client: {
        async addRequest(request) {
          stored.push(request.uniqueKey);
          return { requestId: requestIdFor(request.uniqueKey), wasAlreadyPresent: false, wasAlreadyHandled: false };
        },
        async batchAddRequests(requests) {
          const out = { processedRequests: [], unprocessedRequests: [] };
          for (const r of requests) {
            if (!refused) {
              refused = true;
              out.unprocessedRequests.push({ uniqueKey: r.uniqueKey, url: r.url });
              continue;
            }
            stored.push(r.uniqueKey);
            out.processedRequests.push({ uniqueKey: r.uniqueKey, requestId: requestIdFor(r.uniqueKey), wasAlreadyPresent: false, wasAlreadyHandled: false });
          }
          return out;
        },
      },
    };
    try {
      withSeenSet(queue, s);
      const first = await queue.client.batchAddRequests([{ uniqueKey: 'o1', url: 'http://o/1' }, { uniqueKey: 'o2', url: 'http://o/2' }]);
      assert.deepEqual(first.unprocessedRequests.map((u) => u.uniqueKey), ['o1']);
      assert.equal(seenSetStats(queue).owed, 1);
      // The retry: the cluster has o1 (this queue added it), yet it goes in.
      const retry = await queue.client.batchAddRequests([{ uniqueKey: 'o1', url: 'http://o/1' }]);
      assert.equal(retry.processedRequests[0].wasAlreadyPresent, false);
      assert.deepEqual(stored, ['o2', 'o1']);
      assert.equal(seenSetStats(queue).owed, 0);
      // Now it is an ordinary seen key.
      assert.equal((await queue.client.addRequest({ uniqueKey: 'o1', url: 'http://o/1' })).wasAlreadyPresent, true);
      assert.throws(() => withSeenSet({}, s), TypeError);
      assert.throws(() => withSeenSet(queue, {}), TypeError);
    } finally {
      await s.close();
    }
  });

  test('no node left: the add rejects, or with admitWhenUnavailable lets the requests in', async () => {
    const c = await Cluster.start(1);
    const s = new SeenSet({ urls: c.urls, filter: 'q:gone', timeoutMs: 1000 });
    const t = new SeenSet({ urls: c.urls, filter: 'q:gone2', timeoutMs: 1000 });
    try {
      const strict = withSeenSet(await freshQueue(), s);
      const lenient = withSeenSet(await freshQueue(), t, { admitWhenUnavailable: true });
      await strict.addRequests(['http://g.test/1']);
      await lenient.addRequests(['http://g.test/1']);
      await c.kill(0);
      await assert.rejects(strict.addRequests(['http://g.test/2']), NoNodeAvailable);
      const r = await lenient.addRequests(['http://g.test/2', 'http://g.test/3']);
      assert.deepEqual(r.processedRequests.map((p) => p.wasAlreadyPresent), [false, false]);
      assert.equal(seenSetStats(lenient).admittedUnavailable, 2);
      assert.deepEqual(await drain(lenient), ['http://g.test/1', 'http://g.test/2', 'http://g.test/3']);
    } finally {
      await s.close();
      await t.close();
      await c.close();
    }
  });

  test('two CheerioCrawlers on one site fetch each page once between them', async () => {
    const PAGES = 40;
    const hits = new Map();
    const server = http.createServer((req, res) => {
      const m = /^\/p\/(\d+)$/.exec(req.url);
      if (!m || Number(m[1]) >= PAGES) { res.writeHead(404).end(); return; }
      const n = Number(m[1]);
      hits.set(n, (hits.get(n) || 0) + 1);
      const links = [0, (n + 1) % PAGES, (n * 7 + 3) % PAGES, (n * 13 + 5) % PAGES].map((k) => `<a href="/p/${k}">x</a>`);
      setTimeout(() => res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body>${links.join('')}</body></html>`), 5);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${server.address().port}`;
    const sets = [];
    try {
      const reserve = new SeenSet({ urls: cluster.urls, filter: 'q:crawl' });
      await reserve.reserve(0.001, 100000, { routed: true });
      await reserve.close();
      // Every node has the filter before the crawl (see reserve_everywhere in
      // clients/python/tests/test_scrapy_crawl.py for why).
      await waitUntil(async () => (await Promise.all(cluster.respPorts.map((p) => existsAt(p, 'q:crawl')))).every(Boolean));
      const fetched = [[], []];
      const crawlers = [0, 1].map((i) => {
        const seenSet = new SeenSet({ urls: [cluster.urls[i], ...cluster.urls.filter((_, j) => j !== i)], filter: 'q:crawl' });
        sets.push(seenSet);
        const config = new Configuration({ persistStorage: false, purgeOnStart: false });
        return RequestQueue.open(`crawl${i}-${++opened}`, { config }).then((queue) => new CheerioCrawler({
          requestQueue: withSeenSet(queue, seenSet),
          maxConcurrency: 5,
          maxRequestRetries: 0,
          async requestHandler({ request, enqueueLinks }) {
            fetched[i].push(request.url);
            await enqueueLinks({ strategy: 'same-origin' });
          },
        }, config));
      });
      const [c0, c1] = await Promise.all(crawlers);
      await Promise.all([c0.run([`${base}/p/0`]), c1.run([`${base}/p/${PAGES / 2}`])]);
      assert.deepEqual([...hits.keys()].sort((x, y) => x - y), Array.from({ length: PAGES }, (_, k) => k), 'pages never fetched');
      assert.deepEqual([...hits].filter(([, n]) => n !== 1), [], 'pages fetched more than once');
      assert.equal(fetched[0].length + fetched[1].length, PAGES);
      assert.ok(sets[0].seenKeys + sets[1].seenKeys > 0, 'no duplicate was dropped');
    } finally {
      for (const s of sets) await s.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

async function existsAt(port, filter) {
  const { default: Redis } = await import('ioredis');
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.exists(filter)) === 1;
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

async function waitUntil(ready, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await ready()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('timed out');
}
