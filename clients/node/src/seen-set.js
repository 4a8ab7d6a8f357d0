'use strict';
// SeenSet: "have we seen these keys?" against a Pollen cluster, over ioredis.
//
// The same contract as the Python client (clients/python/pollen/client.py):
// keys go into one filter with BF.MADD at the first node of `urls` that
// answers (list the local node first), and each key is answered "seen
// before" (true) or "new" (false).
//
// Failing over, it never answers "seen" for a key whose add it cannot vouch
// for. A request that failed before it was sent (no connection could be
// made, or the node had closed the idle one) is asked of the next node and
// its answers are trusted. A request that failed after it was sent (the
// connection broke, or no reply came within timeoutMs) may or may not have
// landed: its keys are answered "new", since a URL crawled twice is better
// than one never crawled, and added again at the next node.
//
// Calls are coalesced: the keys of every seenAdd (and every seen) made in the
// same turn of the event loop, or while the previous request is in flight, go
// out together, at most batchSize keys per command. One request is in flight
// at a time, on one connection.

const Redis = require('ioredis');

const { ReplyError } = Redis;

/** Every node in the list failed for one request. */
class NoNodeAvailable extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'NoNodeAvailable';
  }
}

/** No reply within the timeout (the connection is then dropped). */
class ReplyTimeout extends Error {
  constructor(message) {
    super(message);
    this.name = 'ReplyTimeout';
  }
}

// The request was not sent: safe to ask another node and trust it.
class NotSent extends Error {}

const DEFAULTS = {
  batchSize: 1000,
  waitReplicas: 0,
  waitTimeoutMs: 1000,
  timeoutMs: 5000,
  connectTimeoutMs: 5000,
  homeRetryMs: 30000,
};

// ioredis' own recovery (reconnecting, queueing commands while offline,
// resending them after a reconnect) would hide which node answered, and
// whether a command was sent: off, the SeenSet fails over itself.
const FORCED_REDIS_OPTIONS = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  retryStrategy: () => null,
  reconnectOnError: () => false,
  autoResendUnfulfilledCommands: false,
  autoResubscribe: false,
  enableAutoPipelining: false,
  enableReadyCheck: false,
  commandTimeout: undefined, // per command, below
};

function positiveInteger(value, name) {
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${name} must be an integer of at least 1, got ${value}`);
  }
  return value;
}

function nonNegativeNumber(value, name) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a number of at least 0, got ${value}`);
  }
  return value;
}

function normalizeUrl(url) {
  if (typeof url !== 'string' || url === '') {
    throw new TypeError(`a node URL must be a non-empty string, got ${url}`);
  }
  return url.includes('://') ? url : `redis://${url}`;
}

function checkKeys(keys) {
  if (keys == null || typeof keys[Symbol.iterator] !== 'function' || typeof keys === 'string') {
    throw new TypeError('keys must be an array (or another iterable) of strings or Buffers');
  }
  const out = Array.from(keys);
  for (const k of out) {
    if (typeof k !== 'string' && !Buffer.isBuffer(k)) {
      throw new TypeError(`a key must be a string or a Buffer, got ${typeof k}`);
    }
  }
  return out;
}

class SeenSet {
  /**
   * @param {object} options
   * @param {string|string[]} options.urls node addresses, local node first:
   *   "redis://host:port" (also "redis://:password@host:port", "rediss://..."), or "host:port".
   * @param {string} options.filter the filter's name.
   * @param {number} [options.batchSize=1000] keys per BF.MADD / BF.MEXISTS (and per WAIT).
   * @param {number} [options.waitReplicas=0] WAIT for this many other nodes after each batch.
   * @param {number} [options.waitTimeoutMs=1000] WAIT's timeout.
   * @param {number} [options.timeoutMs=5000] a reply later than this counts the node as failed
   *   (a WAIT gets waitTimeoutMs more: it may take its whole timeout without its node failing).
   * @param {number} [options.connectTimeoutMs=5000] connecting longer than this counts the node as failed.
   * @param {number} [options.homeRetryMs=30000] after failing over, how often to try the first node again.
   * @param {object} [options.redisOptions] more ioredis options (e.g. tls); those that would make
   *   ioredis reconnect, queue or resend by itself are overridden.
   */
  constructor(options = {}) {
    const o = { ...DEFAULTS, ...options };
    let urls = o.urls;
    if (typeof urls === 'string') urls = [urls];
    if (!Array.isArray(urls) || urls.length === 0) {
      throw new TypeError('SeenSet needs at least one node URL (options.urls)');
    }
    if ((typeof o.filter !== 'string' && !Buffer.isBuffer(o.filter)) || o.filter.length === 0) {
      throw new TypeError('SeenSet needs a filter name (options.filter)');
    }
    this.urls = urls.map(normalizeUrl);
    this.filter = o.filter;
    this.batchSize = positiveInteger(o.batchSize, 'batchSize');
    this.waitReplicas = Math.floor(nonNegativeNumber(o.waitReplicas, 'waitReplicas'));
    this.waitTimeoutMs = Math.floor(nonNegativeNumber(o.waitTimeoutMs, 'waitTimeoutMs'));
    this.timeoutMs = positiveInteger(o.timeoutMs, 'timeoutMs');
    this.connectTimeoutMs = positiveInteger(o.connectTimeoutMs, 'connectTimeoutMs');
    this.homeRetryMs = nonNegativeNumber(o.homeRetryMs, 'homeRetryMs');
    this.redisOptions = { ...(o.redisOptions || {}) };

    this._index = 0; // the node in use
    this._client = null; // its connection, or null
    this._leftHomeAt = 0;
    this._jobs = []; // calls waiting for their keys to be sent, oldest first
    this._scheduled = false;
    this._running = null; // the drain loop's promise while it runs
    this._closing = false;

    // Counters, for logs and tests.
    this.failovers = 0; // moves to another node
    this.unvouched = 0; // keys answered "new" because their request failed in flight
    this.shortWaits = 0; // WAITs that reached fewer than waitReplicas nodes
    this.requests = 0; // BF.MADD and BF.MEXISTS commands that got their answers
    this.seenKeys = 0; // keys seenAdd answered "seen before"
    this.newKeys = 0; // keys seenAdd answered "new"
  }

  /** The URL of the node in use. */
  get node() {
    return this.urls[this._index];
  }

  /** Adds keys; resolves to, per key, true if it was seen before. */
  seenAdd(keys) {
    return this._submit('add', keys);
  }

  /** Per key, true if it may have been added (BF.MEXISTS; adds nothing). */
  seen(keys) {
    return this._submit('exists', keys);
  }

  /**
   * Creates the filter (BF.RESERVE); an existing filter is left as it is.
   * routed: one decider per key across the cluster (docs/routing.md).
   */
  reserve(errorRate, capacity, { routed = false } = {}) {
    const args = ['BF.RESERVE', this.filter, String(Number(errorRate)), String(Math.floor(Number(capacity)))];
    if (routed) args.push('ROUTED');
    // A job of its own in the queue: one request at a time on the connection.
    return this._enqueue({
      kind: 'call',
      run: async () => {
        try {
          await this._run((client) => this._command(client, args, this.timeoutMs));
        } catch (e) {
          if (!(e instanceof ReplyError && /exists/i.test(e.message))) throw e;
        }
      },
    });
  }

  /**
   * Deletes the filter (DEL: at every node, by replication); resolves to true
   * if it existed at the node that answered. A later call makes it anew.
   */
  delete() {
    return this._enqueue({
      kind: 'call',
      run: async () => {
        const { result } = await this._run((client) => this._command(client, ['DEL', this.filter], this.timeoutMs));
        return result === 1;
      },
    });
  }

  /** Waits for the calls already made, then closes the connection. Later calls reject. */
  async close() {
    this._closing = true;
    await this._idle();
    this._disconnect();
  }

  // -- batching -------------------------------------------------------------

  _submit(kind, keys) {
    let list;
    try {
      list = checkKeys(keys);
    } catch (e) {
      return Promise.reject(e);
    }
    if (list.length === 0 && !this._closing) return Promise.resolve([]);
    return this._enqueue({ kind, keys: list, next: 0, answers: new Array(list.length), left: list.length });
  }

  _enqueue(job) {
    if (this._closing) return Promise.reject(new Error('SeenSet is closed'));
    return new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
      this._jobs.push(job);
      this._schedule();
    });
  }

  _schedule() {
    if (this._scheduled || this._running) return;
    this._scheduled = true;
    // setImmediate: every call made in this turn of the event loop (and in
    // the promise callbacks it runs) joins the first batch.
    setImmediate(() => {
      this._scheduled = false;
      this._running = this._drain().finally(() => {
        this._running = null;
        if (this._jobs.length) this._schedule();
      });
    });
  }

  async _idle() {
    while (this._running || this._scheduled || this._jobs.length) {
      if (this._running) {
        await this._running;
      } else {
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  async _drain() {
    while (this._jobs.length) {
      if (this._jobs[0].kind === 'call') {
        const job = this._jobs.shift();
        try {
          job.resolve(await job.run());
        } catch (e) {
          job.reject(e);
        }
        continue;
      }
      // One batch: keys from the oldest calls of the same kind, in order.
      const kind = this._jobs[0].kind;
      const keys = [];
      const parts = []; // [job, first answer index, count]
      for (const job of this._jobs) {
        if (job.kind !== kind || keys.length === this.batchSize) break;
        const n = Math.min(job.keys.length - job.next, this.batchSize - keys.length);
        for (let i = 0; i < n; i++) keys.push(job.keys[job.next + i]);
        parts.push([job, job.next, n]);
        job.next += n;
      }
      while (this._jobs.length && this._jobs[0].next === this._jobs[0].keys.length) this._jobs.shift();
      let answers;
      try {
        answers = kind === 'add' ? await this._addBatch(keys) : await this._existsBatch(keys);
      } catch (e) {
        // Every call with keys in this batch fails, whole.
        const failed = new Set(parts.map(([job]) => job));
        this._jobs = this._jobs.filter((job) => !failed.has(job));
        for (const job of failed) job.reject(e);
        continue;
      }
      let at = 0;
      for (const [job, first, n] of parts) {
        for (let i = 0; i < n; i++) job.answers[first + i] = answers[at++];
        job.left -= n;
        if (job.left === 0) job.resolve(job.answers);
      }
    }
  }

  // -- requests ---------------------------------------------------------------

  async _addBatch(batch) {
    const { result, vouched } = await this._run((client) =>
      this._command(client, ['BF.MADD', this.filter, ...batch], this.timeoutMs));
    const replies = checkReplies(result, batch.length);
    this.requests++;
    if (!vouched) this.unvouched += batch.length;
    const seen = replies.map((r) => vouched && r === 0);
    for (const s of seen) {
      if (s) this.seenKeys++;
      else this.newKeys++;
    }
    if (this.waitReplicas > 0) await this._wait(batch);
    return seen;
  }

  async _existsBatch(batch) {
    const { result } = await this._run((client) =>
      this._command(client, ['BF.MEXISTS', this.filter, ...batch], this.timeoutMs));
    const replies = checkReplies(result, batch.length);
    this.requests++;
    return replies.map((r) => r === 1);
  }

  async _wait(batch) {
    // A node that fails during WAIT has answered the adds already; the keys
    // are added again at the next node (answers ignored) and WAITed there,
    // so they are replicated all the same.
    let tries = 0;
    const { result } = await this._run(async (client) => {
      tries++;
      if (tries > 1) {
        checkReplies(await this._command(client, ['BF.MADD', this.filter, ...batch], this.timeoutMs), batch.length);
      }
      return this._command(client, ['WAIT', String(this.waitReplicas), String(this.waitTimeoutMs)],
        this.timeoutMs + this.waitTimeoutMs);
    });
    if (Number(result) < this.waitReplicas) this.shortWaits++;
  }

  /**
   * Runs request(client) on the node in use, moving on to the next node on a
   * connection failure (each node tried once). Resolves to {result, vouched}:
   * vouched is false when an earlier try failed after sending.
   */
  async _run(request) {
    this._maybeGoHome();
    let vouched = true;
    const failures = [];
    for (let tried = 0; tried < this.urls.length; tried++) {
      try {
        const client = await this._connection();
        return { result: await request(client), vouched };
      } catch (e) {
        if (e instanceof ReplyError) throw e; // the node answered: an error of the request itself
        if (!(e instanceof NotSent)) vouched = false;
        failures.push(`${this.node}: ${(e instanceof NotSent && e.cause) ? e.cause.message : e.message}`);
      }
      this._disconnect();
      this._moveOn();
    }
    throw new NoNodeAvailable(`no Pollen node answered (${failures.join('; ')})`);
  }

  /** The open connection to the node in use; throws NotSent if there is none to be had. */
  async _connection() {
    if (this._client && !writable(this._client)) this._disconnect(); // the node closed it while idle
    if (this._client) return this._client;
    const client = new Redis(this.node, {
      disableClientInfo: true, // no CLIENT SETINFO round trips on each connect
      ...this.redisOptions,
      ...FORCED_REDIS_OPTIONS,
      connectTimeout: this.connectTimeoutMs,
    });
    client.on('error', () => {}); // failures surface through connect() and the commands
    try {
      await client.connect();
    } catch (e) {
      client.disconnect();
      throw new NotSent(e.message, { cause: e });
    }
    if (!writable(client)) {
      client.disconnect();
      throw new NotSent('closed as it opened', { cause: new Error('connection closed as it opened') });
    }
    this._client = client;
    return client;
  }

  /**
   * Sends one command and waits at most timeoutMs for its reply. Throws
   * NotSent if the connection cannot take it; after that, any failure means
   * the command was written.
   */
  _command(client, args, timeoutMs) {
    if (!writable(client)) {
      return Promise.reject(new NotSent('connection not writable', { cause: new Error('connection closed') }));
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new ReplyTimeout(`no reply to ${args[0]} within ${timeoutMs} ms`));
        client.disconnect(); // a late reply must not be read as the next command's
      }, timeoutMs);
      // ioredis writes the command to the socket here, synchronously.
      client.call(...args).then(
        (reply) => { clearTimeout(timer); resolve(reply); },
        (err) => { clearTimeout(timer); reject(err); },
      );
    });
  }

  _disconnect() {
    if (this._client) {
      this._client.disconnect();
      this._client = null;
    }
  }

  _moveOn() {
    if (this._index === 0) this._leftHomeAt = Date.now();
    this._index = (this._index + 1) % this.urls.length;
    this.failovers++;
  }

  _maybeGoHome() {
    if (this._index !== 0 && Date.now() - this._leftHomeAt >= this.homeRetryMs) {
      this._disconnect();
      this._index = 0;
    }
  }
}

function writable(client) {
  return client.status === 'ready' && client.stream != null && client.stream.writable &&
    !(client.stream._writableState && client.stream._writableState.ended);
}

function checkReplies(replies, count) {
  if (!Array.isArray(replies)) {
    throw new ReplyError(`expected an array reply, got ${typeof replies}`);
  }
  for (const r of replies) {
    if (r instanceof Error) throw r; // e.g. a full NONSCALING filter refuses a key
  }
  if (replies.length !== count) {
    throw new ReplyError(`expected ${count} answers, got ${replies.length}`);
  }
  return replies;
}

module.exports = { SeenSet, NoNodeAvailable, ReplyTimeout, ReplyError };
