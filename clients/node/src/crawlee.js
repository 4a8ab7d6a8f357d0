'use strict';
// Crawlee: a RequestQueue that drops every request whose uniqueKey was seen
// anywhere in the Pollen cluster, before it enters the queue.
//
// Every way a request enters a Crawlee RequestQueue (addRequest,
// addRequests, addRequestsBatched, and so crawler.run(startUrls),
// crawler.addRequests, enqueueLinks, context.addRequests, a RequestList in
// tandem, requestsFromUrl) ends in one of two calls on the queue's storage
// client, queue.client.addRequest(request) and
// queue.client.batchAddRequests(requests), with each request already built
// (its uniqueKey computed) and after the queue's own in-process dedup cache
// has answered what it knows. withSeenSet() hooks those two calls on one
// queue instance: the requests the cluster has seen are answered as
// Crawlee answers a request already in the queue (wasAlreadyPresent: true)
// and never stored; the others are stored as usual.

const crypto = require('node:crypto');

const hooks = new WeakMap(); // queue -> its hook's state

/** The id Crawlee gives a request with this uniqueKey (@crawlee/core's getRequestId). */
function requestIdFor(uniqueKey) {
  return crypto.createHash('sha256').update(uniqueKey).digest('base64').replace(/[+/=]/g, '').slice(0, 15);
}

/**
 * Filters a Crawlee RequestQueue (RequestQueue, RequestQueueV1, or any
 * RequestProvider over a storage client) through a SeenSet, in place, and
 * returns it. Pass the queue to the crawler: new CheerioCrawler({ requestQueue }).
 *
 * options.admitWhenUnavailable: when no node answers, let the requests in
 *   (and count them) instead of failing the add (default false: the add
 *   rejects with NoNodeAvailable, as a request handler error that Crawlee
 *   retries).
 */
function withSeenSet(queue, seenSet, options = {}) {
  if (!seenSet || typeof seenSet.seenAdd !== 'function') {
    throw new TypeError('withSeenSet(queue, seenSet): seenSet must be a SeenSet');
  }
  const client = queue && queue.client;
  if (!client || typeof client.addRequest !== 'function' || typeof client.batchAddRequests !== 'function') {
    throw new TypeError('withSeenSet(queue, seenSet): queue must be a Crawlee RequestQueue ' +
      '(await RequestQueue.open(...)), with a storage client');
  }
  const existing = hooks.get(queue);
  if (existing) {
    if (existing.seenSet === seenSet) return queue;
    throw new Error('this RequestQueue is already filtered through another SeenSet');
  }
  const state = {
    seenSet,
    admitWhenUnavailable: Boolean(options.admitWhenUnavailable),
    // Keys the cluster holds (this queue added them) that the storage did
    // not take: the caller retries them, and they must not then be dropped.
    owed: new Set(),
    stats: { asked: 0, dropped: 0, passed: 0, admittedUnavailable: 0 },
  };
  hooks.set(queue, state);

  const addRequest = client.addRequest;
  const batchAddRequests = client.batchAddRequests;

  // Which of these requests the cluster has seen (true: drop it).
  async function seenByCluster(requests) {
    const keys = requests.map((r) => r.uniqueKey);
    state.stats.asked += keys.length;
    let seen;
    try {
      seen = await seenSet.seenAdd(keys);
    } catch (e) {
      if (!state.admitWhenUnavailable || e.name !== 'NoNodeAvailable') throw e;
      state.stats.admittedUnavailable += keys.length;
      return keys.map(() => false);
    }
    return seen.map((s, i) => {
      if (state.owed.has(keys[i])) return false;
      return s;
    });
  }

  function dropped(request) {
    state.stats.dropped++;
    return {
      uniqueKey: request.uniqueKey,
      requestId: request.id || requestIdFor(request.uniqueKey),
      wasAlreadyPresent: true,
      // Seen in the cluster, perhaps being handled elsewhere: not known handled.
      wasAlreadyHandled: false,
    };
  }

  client.addRequest = async function pollenAddRequest(request, opts) {
    const [seen] = await seenByCluster([request]);
    if (seen) {
      const { uniqueKey, ...info } = dropped(request);
      return info;
    }
    let info;
    try {
      info = await addRequest.call(client, request, opts);
    } catch (e) {
      state.owed.add(request.uniqueKey);
      throw e;
    }
    state.owed.delete(request.uniqueKey);
    state.stats.passed++;
    return info;
  };

  client.batchAddRequests = async function pollenBatchAddRequests(requests, opts) {
    const list = Array.from(requests);
    const seen = await seenByCluster(list);
    const fresh = list.filter((_, i) => !seen[i]);
    let result = { processedRequests: [], unprocessedRequests: [] };
    if (fresh.length) {
      try {
        result = await batchAddRequests.call(client, fresh, opts);
      } catch (e) {
        for (const r of fresh) state.owed.add(r.uniqueKey);
        throw e;
      }
    }
    const processed = new Map(result.processedRequests.map((p) => [p.uniqueKey, p]));
    for (const u of result.unprocessedRequests || []) state.owed.add(u.uniqueKey);
    const out = [];
    list.forEach((r, i) => {
      if (seen[i]) {
        out.push(dropped(r));
        return;
      }
      const p = processed.get(r.uniqueKey);
      if (p) {
        processed.delete(r.uniqueKey);
        state.owed.delete(r.uniqueKey);
        state.stats.passed++;
        out.push(p);
      }
    });
    out.push(...processed.values()); // whatever the storage answered beyond the requests given
    return { ...result, processedRequests: out, unprocessedRequests: result.unprocessedRequests || [] };
  };

  return queue;
}

/**
 * Counters of a queue filtered by withSeenSet (a copy), or undefined:
 * asked (uniqueKeys asked of the cluster), dropped (answered seen, kept out
 * of the queue), passed (handed to the queue's storage, which may still find
 * them present), admittedUnavailable (let in
 * because no node answered, with admitWhenUnavailable).
 */
function seenSetStats(queue) {
  const state = hooks.get(queue);
  return state ? { ...state.stats, owed: state.owed.size } : undefined;
}

module.exports = { withSeenSet, seenSetStats, requestIdFor };
