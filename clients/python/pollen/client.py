"""SeenSet: "have we seen these keys?" against a Pollen cluster.

Each call adds its keys to one filter with BF.MADD (batched) at the first
node of `urls` that answers (list the local node first), and answers per key
whether it was seen before. With wait_replicas > 0 each batch is followed by
WAIT wait_replicas wait_timeout_ms, so a key answered "new" is also held by
that many other nodes before the call returns: a node that dies afterwards
takes nothing with it.

Failing over, it never answers "seen" for a key whose add it cannot vouch
for. A request that failed before it was sent (the node refused the
connection, or had closed it while idle) is asked of the next node and its
answers are trusted. A request that failed after it was sent may or may not
have landed; its keys are then answered "new" (not seen), since a URL crawled
twice is better than one never crawled, and added again at the next node.

Thread safety: one SeenSet per thread (it holds one connection).
"""
import time

import redis

_CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


class NoNodeAvailable(redis.ConnectionError):
    """Every node in the list failed for one request."""


class _NotSent(Exception):
    """The request was not sent: safe to ask another node and trust it."""


class SeenSet:
    """A seen-set on one Pollen filter (see the module's docstring).

    urls: node addresses, local node first: "redis://host:port" (also
      "redis://:password@host:port", "rediss://..."), or "host:port".
    batch_size: keys per BF.MADD (and per WAIT).
    wait_replicas, wait_timeout_ms: WAIT after each batch (0: no WAIT).
    socket_timeout: seconds for one reply before the node counts as failed
      (with wait_replicas, replies may take wait_timeout_ms longer: a WAIT
      takes up to its timeout by design, and is not a failed node).
    home_retry_seconds: after failing over, how often to try the first node again.
    """

    def __init__(self, urls, filter_name, batch_size=1000, wait_replicas=0, wait_timeout_ms=1000,
                 socket_timeout=5.0, home_retry_seconds=30.0):
        if isinstance(urls, str):
            urls = [urls]
        if not urls:
            raise ValueError("SeenSet needs at least one node URL")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if wait_replicas < 0 or wait_timeout_ms < 0:
            raise ValueError("wait_replicas and wait_timeout_ms must not be negative")
        self.urls = [u if "://" in u else "redis://" + u for u in urls]
        self.filter = filter_name
        self.batch_size = batch_size
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.socket_timeout = socket_timeout
        self.home_retry_seconds = home_retry_seconds
        self._index = 0          # the node in use
        self._conn = None        # its connection, or None
        self._left_home_at = 0.0
        # Counters, for logs and tests.
        self.failovers = 0       # moves to another node
        self.unvouched = 0       # keys answered "new" because their request failed in flight
        self.short_waits = 0     # WAITs that reached fewer than wait_replicas nodes
        self.rewaited = 0        # keys answered "new" whose WAIT failed with its node: added again at the next

    @property
    def node(self):
        """The URL of the node in use."""
        return self.urls[self._index]

    def seen_add(self, keys):
        """Adds keys; returns, per key, True if it was seen before."""
        keys = list(keys)
        seen = []
        for start in range(0, len(keys), self.batch_size):
            seen.extend(self._add_batch(keys[start:start + self.batch_size]))
        return seen

    def seen(self, keys):
        """Per key, True if it may have been added (BF.MEXISTS; adds nothing)."""
        keys = list(keys)
        out = []
        for start in range(0, len(keys), self.batch_size):
            batch = keys[start:start + self.batch_size]
            replies, _ = self._run(lambda c, b=batch: self._command(c, "BF.MEXISTS", self.filter, *b))
            out.extend(bool(r) for r in replies)
        return out

    def reserve(self, error_rate, capacity, routed=False):
        """Creates the filter (BF.RESERVE); an existing filter is left as it is.
        routed=True: one decider per key across the cluster (docs/routing.md)."""
        args = ["BF.RESERVE", self.filter, repr(float(error_rate)), str(int(capacity))]
        if routed:
            args.append("ROUTED")
        try:
            self._run(lambda c: self._command(c, *args))
        except redis.ResponseError as e:
            if "exists" not in str(e):
                raise

    def delete(self):
        """Deletes the filter (DEL: at every node, by replication); True if it
        existed at the node that answered."""
        deleted, _ = self._run(lambda c: self._command(c, "DEL", self.filter))
        return deleted == 1

    def close(self):
        if self._conn is not None:
            self._conn.disconnect()
            self._conn = None

    # -- internals ---------------------------------------------------------

    def _add_batch(self, batch):
        replies, vouched = self._run(lambda c: self._command(c, "BF.MADD", self.filter, *batch))
        if not vouched:
            self.unvouched += len(batch)
        seen = [vouched and r == 0 for r in replies]
        for r in replies:
            if isinstance(r, redis.ResponseError):  # a full NONSCALING filter refuses a key
                raise r
        if self.wait_replicas > 0:
            self._wait(batch)
        return seen

    def _wait(self, batch):
        # A node that fails during WAIT has answered the adds already; the
        # keys are added again at the next node (answers ignored) and WAITed
        # there, so they are replicated all the same. Until then the next
        # node may not hold them: another client adding one of them there
        # meanwhile is also answered "new" (counted in rewaited).
        tries = 0

        def add_then_wait(conn):
            nonlocal tries
            tries += 1
            if tries > 1:
                self.rewaited += len(batch)
                self._command(conn, "BF.MADD", self.filter, *batch)
            return self._command(conn, "WAIT", str(self.wait_replicas), str(self.wait_timeout_ms))

        reached, _ = self._run(add_then_wait)
        if reached < self.wait_replicas:
            self.short_waits += 1

    def _run(self, request):
        """Runs request(conn) on the node in use, moving on to the next node on
        a connection failure (each node tried once). Returns (result, vouched):
        vouched is False when an earlier try failed after sending."""
        self._maybe_go_home()
        vouched = True
        for _ in range(len(self.urls)):
            try:
                return request(self._connection()), vouched
            except _NotSent:
                pass
            except _CONNECTION_ERRORS:
                vouched = False
            self.close()
            self._move_on()
        raise NoNodeAvailable("no Pollen node answered: %s" % ", ".join(self.urls))

    def _connection(self):
        """The open connection to the node in use; raises _NotSent if there
        is none to be had, or the node closed the idle one and refuses a new one."""
        if self._conn is not None and self._peer_closed(self._conn):
            self.close()
        if self._conn is None:
            conn = _connection_from_url(self.urls[self._index], self._reply_timeout(), self.socket_timeout)
            try:
                conn.connect()
            except _CONNECTION_ERRORS as e:
                raise _NotSent() from e
            self._conn = conn
        return self._conn

    def _reply_timeout(self):
        # One socket timeout serves every command of a connection (redis-py
        # 4.3 has no per-call timeout), so it covers the slowest, WAIT.
        # Without the extra, a WAIT that waited out a killed peer for more
        # than socket_timeout counted its healthy node as failed and moved on.
        extra = self.wait_timeout_ms / 1000.0 if self.wait_replicas > 0 else 0.0
        return self.socket_timeout + extra

    @staticmethod
    def _peer_closed(conn):
        # Nothing is expected between requests: readable means the server
        # closed the connection (EOF) or broke the protocol.
        try:
            return conn.can_read(timeout=0)
        except _CONNECTION_ERRORS:
            return True

    @staticmethod
    def _command(conn, *args):
        conn.send_command(*args)
        return conn.read_response()

    def _move_on(self):
        if self._index == 0:
            self._left_home_at = time.monotonic()
        self._index = (self._index + 1) % len(self.urls)
        self.failovers += 1

    def _maybe_go_home(self):
        if self._index != 0 and time.monotonic() - self._left_home_at >= self.home_retry_seconds:
            self.close()
            self._index = 0


def _connection_from_url(url, reply_timeout, connect_timeout):
    kwargs = redis.connection.parse_url(url)
    kwargs.pop("connection_class", None)
    kwargs["socket_timeout"] = reply_timeout
    kwargs["socket_connect_timeout"] = connect_timeout
    if url.startswith("rediss://"):
        return redis.SSLConnection(**kwargs)
    return redis.Connection(**kwargs)
