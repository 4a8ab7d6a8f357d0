#!/usr/bin/python3
"""End-to-end checks of a RESP server (pollend, or Redis + RedisBloom) through
redis-py, the client Debian ships as python3-redis (4.3 on Debian 12).

Usage: redis_py_test.py HOST PORT

The expected replies are Redis 7.0's and RedisBloom 2.4's. Every key this run
touches starts with a random prefix, so the run can share a server with others.
Prints one line per check, then `N passed, M failed` alone on the last line;
exits 1 if any check failed.
"""

import inspect
import secrets
import sys
import traceback

import redis
from redis.exceptions import ExecAbortError, ResponseError, WatchError

if len(sys.argv) != 3:
    print("usage: redis_py_test.py HOST PORT", file=sys.stderr)
    sys.exit(2)

HOST = sys.argv[1]
PORT = int(sys.argv[2])
PFX = "pyt" + secrets.token_hex(4) + ":"
BLOOM_TYPE = "MBbloom--"

passed = 0
failed = 0
CHECKS = []


class Skip(Exception):
    """A check that this client version cannot run: reported, not counted."""


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_eq(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def expect_error(fn, fragment, what):
    try:
        got = fn()
    except ResponseError as e:
        if fragment.lower() not in str(e).lower():
            raise AssertionError(f"{what}: error {str(e)!r} lacks {fragment!r}")
        return
    raise AssertionError(f"{what}: no error, got {got!r}")


def client(**kw):
    kw.setdefault("decode_responses", True)
    kw.setdefault("socket_timeout", 10)
    kw.setdefault("socket_connect_timeout", 10)
    return redis.Redis(host=HOST, port=PORT, **kw)


def single():
    """A client bound to one connection: MULTI ... EXEC typed by hand stays on it."""
    return client(single_connection_client=True)


def key(name):
    return PFX + name


R = client()            # raw replies: never given the bf() callbacks
BF = client().bf()      # the RedisBloom helper (installs its own reply callbacks on its client)


# ---------------------------------------------------------------- plain commands

@check
def connect_ping_echo():
    expect_eq(R.ping(), True, "PING")
    expect_eq(R.echo("hello pollen"), "hello pollen", "ECHO")


@check
def hello_2_handshake():
    rep = R.execute_command("HELLO", "2")
    expect(isinstance(rep, list) and len(rep) % 2 == 0, f"HELLO 2 is a flat field/value array: {rep!r}")
    d = dict(zip(rep[::2], rep[1::2]))
    expect_eq(d.get("proto"), 2, "HELLO 2 proto")
    expect_eq(d.get("server"), "redis", "HELLO 2 server")
    expect(str(d.get("version", "")).startswith("7."), f"HELLO 2 version 7.x: {d.get('version')!r}")
    expect_eq(d.get("role"), "master", "HELLO 2 role")


@check
def bf_reserve():
    bf = BF
    k = key("reserve")
    expect_eq(bf.create(k, 0.01, 1000), True, "bf().create (BF.RESERVE)")
    expect_error(lambda: bf.create(k, 0.01, 1000), "item exists", "BF.RESERVE of an existing filter")
    expect_error(lambda: bf.create(key("reserve-bad"), 2, 1000), "error rate", "BF.RESERVE error rate 2")
    expect_error(lambda: bf.create(key("reserve-bad"), 0.01, 0), "capacity", "BF.RESERVE capacity 0")
    expect_eq(bf.create(key("reserve-ns"), 0.001, 5000, noScale=True), True, "BF.RESERVE ... NONSCALING")
    expect_eq(bf.create(key("reserve-ex"), 0.001, 5000, expansion=4), True, "BF.RESERVE ... EXPANSION 4")


@check
def bf_add_exists():
    bf = BF
    k = key("add")
    bf.create(k, 0.001, 1000)
    expect_eq(bf.add(k, "alpha"), 1, "BF.ADD of a new item")
    expect_eq(bf.add(k, "alpha"), 0, "BF.ADD of a present item")
    expect_eq(bf.exists(k, "alpha"), 1, "BF.EXISTS of an added item")
    expect_eq(bf.exists(k, "never-added"), 0, "BF.EXISTS of another item")
    expect_eq(bf.exists(key("no-such-filter"), "alpha"), 0, "BF.EXISTS on a missing filter")


@check
def bf_madd_mexists():
    bf = BF
    k = key("madd")
    bf.create(k, 0.001, 1000)
    expect_eq(bf.madd(k, "a", "b", "a"), [1, 1, 0], "BF.MADD a b a")
    expect_eq(bf.mexists(k, "a", "b", "zz"), [1, 1, 0], "BF.MEXISTS a b zz")
    expect_eq(bf.mexists(key("no-such-filter"), "a", "b"), [0, 0], "BF.MEXISTS on a missing filter")


@check
def bf_insert():
    bf = BF
    k = key("insert")
    expect_eq(bf.insert(k, ["x", "y"], capacity=500, error=0.001), [1, 1], "BF.INSERT CAPACITY ERROR ITEMS x y")
    expect_eq(bf.insert(k, ["y", "z"]), [0, 1], "BF.INSERT ITEMS y z")
    expect_eq(bf.info(k).capacity, 500, "capacity of the filter BF.INSERT created")
    expect_error(lambda: bf.insert(key("insert-missing"), ["x"], noCreate=True), "not found",
                 "BF.INSERT NOCREATE on a missing filter")


@check
def bf_info():
    bf = BF
    k = key("info")
    bf.create(k, 0.01, 1000)
    bf.madd(k, "a", "b", "c")
    info = bf.info(k)
    expect_eq(info.capacity, 1000, "BF.INFO Capacity")
    expect(isinstance(info.size, int) and info.size > 0, f"BF.INFO Size > 0: {info.size!r}")
    expect_eq(info.filterNum, 1, "BF.INFO Number of filters")
    expect_eq(info.insertedNum, 3, "BF.INFO Number of items inserted")
    expect_eq(R.execute_command("BF.INFO", k, "CAPACITY"), [1000], "BF.INFO key CAPACITY")
    expect_eq(R.execute_command("BF.INFO", k, "ITEMS"), [3], "BF.INFO key ITEMS")
    expect_error(lambda: bf.info(key("no-such-filter")), "not found", "BF.INFO of a missing filter")


@check
def bf_card():
    k = key("card")
    BF.create(k, 0.01, 1000)
    BF.madd(k, "a", "b", "c", "d")
    expect_eq(R.execute_command("BF.CARD", k), 4, "BF.CARD")
    expect_eq(R.execute_command("BF.CARD", key("no-such-filter")), 0, "BF.CARD of a missing filter")


def scaling_stack(capacity, expansion, inserted):
    """RedisBloom's stack of a scaling filter holding `inserted` counted keys:
    layer L holds capacity * expansion**L keys, and an add of a new key that
    finds the newest layer full opens the next one. Returns (number of
    filters, capacity of the stack, capacity before the newest layer opened)."""
    layers, total, before, layer = 1, capacity, 0, capacity
    while total < inserted:
        layer *= expansion
        before = total
        total += layer
        layers += 1
    return layers, total, before


def fill_scaling(k, n, batch=500):
    """BF.MADD of n distinct keys in batches; returns how many answered 1."""
    added = 0
    for start in range(0, n, batch):
        rep = R.execute_command("BF.MADD", k, *[f"grow-{i}" for i in range(start, min(n, start + batch))])
        expect(all(v in (0, 1) for v in rep), f"BF.MADD answers 0/1 only: {[v for v in rep if v not in (0, 1)]!r}")
        added += sum(rep)
    return added


def check_scaling(name, capacity, expansion, n):
    bf = BF
    k = key(name)
    expect_eq(bf.create(k, 0.01, capacity, expansion=expansion), True, f"BF.RESERVE 0.01 {capacity} EXPANSION {expansion}")
    added = fill_scaling(k, n)
    # A false positive answers 0 and is not counted: allow a few percent at 1%.
    expect(0.95 * n <= added <= n, f"{n} new keys: {added} answered 1")
    info = bf.info(k)
    inserted = info.insertedNum
    # One server, one client: the count is exact on both (the adds that answered 1).
    expect_eq(inserted, added, f"Number of items inserted after {n} adds")
    filters, cap, before = scaling_stack(capacity, expansion, inserted)
    # n is chosen well inside the newest layer (20% or more away from the
    # stack capacities on either side), so a few false-positive "already
    # present" adds (or a slightly high item count) cannot move it across a
    # layer boundary: the expected layer count is not at the mercy of chance.
    expect(1.2 * before < n < 0.8 * cap, f"test setup: {n} keys is near a layer boundary ({before}, {cap})")
    expect_eq(info.filterNum, filters, f"Number of filters after {inserted} items (capacity {capacity}, expansion {expansion})")
    expect_eq(info.capacity, cap, f"Capacity after {inserted} items (capacity {capacity}, expansion {expansion})")
    expect_eq(info.expansionRate, expansion, "Expansion rate")
    expect(isinstance(info.size, int) and info.size > 0, f"Size > 0: {info.size!r}")
    expect_eq(R.execute_command("BF.INFO", k, "FILTERS"), [filters], "BF.INFO key FILTERS")
    expect_eq(R.execute_command("BF.INFO", k, "CAPACITY"), [cap], "BF.INFO key CAPACITY")
    expect_eq(R.execute_command("BF.INFO", k, "EXPANSION"), [expansion], "BF.INFO key EXPANSION")
    expect_eq(R.execute_command("BF.CARD", k), inserted, "BF.CARD equals Number of items inserted")
    expect_eq(R.execute_command("BF.MEXISTS", k, "grow-0", f"grow-{n // 2}", f"grow-{n - 1}"), [1, 1, 1],
              "keys of the first, a middle and the newest layer are present")


@check
def bf_scaling_expansion_2():
    # layers 100, 200, 400, 800, 1600: 2200 keys need 5 (1500 < 2200 < 3100)
    check_scaling("scale-x2", 100, 2, 2200)


@check
def bf_scaling_expansion_3():
    # layers 100, 300, 900, 2700: 2600 keys need 4 (1300 < 2600 < 4000)
    check_scaling("scale-x3", 100, 3, 2600)


@check
def bf_nonscaling_full():
    bf = BF
    k = key("nonscaling")
    # Error rate 0.0001: a fresh key is a false positive (answers 0 instead of
    # the error) with negligible probability, in the fill and after it.
    expect_eq(bf.create(k, 0.0001, 100, noScale=True), True, "BF.RESERVE 0.0001 100 NONSCALING")
    accepted, refused_at = 0, None
    for i in range(200):
        try:
            accepted += R.execute_command("BF.ADD", k, f"ns-{i}")
        except ResponseError as e:
            expect("non scaling filter is full" in str(e), f"BF.ADD #{i}: error {str(e)!r}")
            refused_at = i
            break
    expect(refused_at is not None, "200 new keys into a NONSCALING filter of capacity 100: no error")
    expect_eq(accepted, 100, f"new keys accepted before 'non scaling filter is full' (refused at add #{refused_at})")
    expect_error(lambda: bf.add(k, "ns-new-1"), "non scaling filter is full", "BF.ADD of a new key on a full filter")
    expect_error(lambda: bf.add(k, "ns-new-2"), "non scaling filter is full", "BF.ADD of another new key")
    expect_eq(bf.add(k, "ns-0"), 0, "BF.ADD of a present key on a full filter")
    expect_eq(R.execute_command("BF.ADD", k, "ns-1"), 0, "raw BF.ADD of a present key on a full filter")
    rep = R.execute_command("BF.MADD", k, "ns-2", "ns-new-3", "ns-3")
    expect(len(rep) == 2 and rep[0] == 0 and isinstance(rep[1], ResponseError)
           and "non scaling filter is full" in str(rep[1]),
           f"BF.MADD present, new, present: [0, error] (stops at the refused key): {rep!r}")
    expect_eq(bf.mexists(k, "ns-0", "ns-99", "ns-new-1", "ns-new-3"), [1, 1, 0, 0], "refused keys were not added")
    info = bf.info(k)
    expect_eq(info.capacity, 100, "Capacity of a full NONSCALING filter")
    expect_eq(info.filterNum, 1, "Number of filters of a NONSCALING filter")
    # Both count the keys they took exactly (Pollen estimates from the bits only
    # once bits came from elsewhere: peers, a snapshot).
    expect_eq(info.insertedNum, 100, "Number of items inserted of a full NONSCALING filter")
    expect_eq(R.execute_command("BF.CARD", k), info.insertedNum, "BF.CARD equals Number of items inserted")
    expect_eq(info.expansionRate, None, "Expansion rate of a NONSCALING filter is nil")
    expect_eq(R.execute_command("BF.INFO", k, "EXPANSION"), [None], "BF.INFO key EXPANSION (nil)")


@check
def raw_execute_command():
    k = key("raw")
    expect_eq(R.execute_command("BF.RESERVE", k, "0.01", "100"), "OK", "raw BF.RESERVE")
    expect_eq(R.execute_command("BF.ADD", k, "item"), 1, "raw BF.ADD")
    expect_eq(R.execute_command("BF.MADD", k, "item", "other"), [0, 1], "raw BF.MADD")
    expect_eq(R.execute_command("BF.EXISTS", k, "other"), 1, "raw BF.EXISTS")
    expect_eq(R.execute_command("BF.MEXISTS", k, "item", "nope"), [1, 0], "raw BF.MEXISTS")
    expect_error(lambda: R.execute_command("BF.ADD", k), "wrong number of arguments", "BF.ADD with one argument")
    expect_error(lambda: R.execute_command("NO.SUCH.COMMAND", "a"), "unknown command", "an unknown command")
    expect_eq(R.config_get("save"), {"save": ""}, "CONFIG GET save")
    expect(R.execute_command("SELECT", "0") in (True, "OK"), "SELECT 0 answers OK")


# ---------------------------------------------------------------- pipelines

@check
def pipeline_1000_bf_add_no_transaction():
    k = key("pipe")
    BF.create(k, 0.001, 20000)
    items = [f"url-{i}" for i in range(1000)]
    pipe = R.pipeline(transaction=False)
    for it in items:
        pipe.execute_command("BF.ADD", k, it)
    first = pipe.execute()
    expect_eq(len(first), 1000, "replies of 1000 pipelined BF.ADD")
    expect(all(v in (0, 1) for v in first), "every reply is 0 or 1")
    # a false positive on a fresh item answers 0: allow a handful at 0.1%
    expect(sum(first) >= 995, f"new items answer 1: {sum(first)} of 1000")
    pipe = R.pipeline(transaction=False)
    for it in items:
        pipe.execute_command("BF.ADD", k, it)
    expect_eq(pipe.execute(), [0] * 1000, "the same 1000 again all answer 0")
    expect_eq(R.execute_command("BF.MEXISTS", k, *items), [1] * 1000, "BF.MEXISTS of the 1000")
    card = R.execute_command("BF.CARD", k)
    expect(abs(card - sum(first)) <= 0.05 * 1000, f"BF.CARD near {sum(first)}: {card}")


# ---------------------------------------------------------------- transactions

@check
def transaction_pipeline_multi_exec():
    k = key("tx")
    pipe = R.pipeline()  # transaction=True: MULTI ... EXEC
    pipe.execute_command("BF.RESERVE", k, "0.001", "1000")
    pipe.execute_command("BF.ADD", k, "a")
    pipe.execute_command("BF.MADD", k, "a", "b", "c")
    pipe.execute_command("BF.EXISTS", k, "b")
    pipe.execute_command("BF.MEXISTS", k, "c", "d")
    pipe.execute_command("BF.CARD", k)
    res = pipe.execute()
    expect_eq(res, ["OK", 1, [0, 1, 1], 1, [1, 0], 3], "EXEC results")
    expect_eq(R.execute_command("BF.EXISTS", k, "c"), 1, "applied after EXEC")


@check
def multi_queues_until_exec():
    k = key("queued")
    BF.create(k, 0.001, 1000)
    c, other = single(), client()
    try:
        expect_eq(c.execute_command("MULTI"), "OK", "MULTI")
        expect_eq(c.execute_command("BF.ADD", k, "q1"), "QUEUED", "BF.ADD inside MULTI")
        expect_eq(c.execute_command("BF.MADD", k, "q2", "q3"), "QUEUED", "BF.MADD inside MULTI")
        expect_eq(other.execute_command("BF.EXISTS", k, "q1"), 0, "not visible before EXEC")
        expect_eq(c.execute_command("EXEC"), [1, [1, 1]], "EXEC")
        expect_eq(other.execute_command("BF.MEXISTS", k, "q1", "q2", "q3"), [1, 1, 1], "visible after EXEC")
    finally:
        c.close()
        other.close()


@check
def multi_discard_and_misuse():
    k = key("discard")
    BF.create(k, 0.001, 1000)
    c = single()
    try:
        expect_eq(c.execute_command("MULTI"), "OK", "MULTI")
        expect_eq(c.execute_command("BF.ADD", k, "gone"), "QUEUED", "BF.ADD queued")
        expect_error(lambda: c.execute_command("MULTI"), "MULTI calls can not be nested", "nested MULTI")
        expect_eq(c.execute_command("DISCARD"), "OK", "DISCARD")
        expect_eq(c.execute_command("BF.EXISTS", k, "gone"), 0, "a discarded BF.ADD is not applied")
        expect_error(lambda: c.execute_command("EXEC"), "EXEC without MULTI", "EXEC without MULTI")
        expect_error(lambda: c.execute_command("DISCARD"), "DISCARD without MULTI", "DISCARD without MULTI")
        expect_eq(c.execute_command("PING"), True, "the connection still works")
    finally:
        c.close()


@check
def watch_conflict_raises_watch_error():
    k = key("watch")
    BF.create(k, 0.001, 1000)
    other = client()
    try:
        with R.pipeline() as pipe:
            pipe.watch(k)
            expect_eq(pipe.execute_command("BF.EXISTS", k, "w"), 0, "read after WATCH (immediate)")
            other.execute_command("BF.ADD", k, "concurrent")  # a real change from a second connection
            pipe.multi()
            pipe.execute_command("BF.ADD", k, "from-tx")
            try:
                res = pipe.execute()
            except WatchError:
                pass
            else:
                raise AssertionError(f"execute() returned {res!r}, want WatchError")
        expect_eq(R.execute_command("BF.EXISTS", k, "from-tx"), 0, "the aborted transaction applied nothing")
        expect_eq(R.execute_command("BF.EXISTS", k, "concurrent"), 1, "the concurrent add stands")
    finally:
        other.close()


@check
def watch_without_conflict_commits():
    k, k2 = key("watch-ok"), key("watch-other")
    BF.create(k, 0.001, 1000)
    BF.create(k2, 0.001, 1000)
    other = client()
    try:
        with R.pipeline() as pipe:
            pipe.watch(k)
            other.execute_command("BF.ADD", k2, "elsewhere")  # a different key: no conflict
            pipe.multi()
            pipe.execute_command("BF.ADD", k, "from-tx")
            expect_eq(pipe.execute(), [1], "EXEC under an untouched WATCH")
        expect_eq(R.execute_command("BF.EXISTS", k, "from-tx"), 1, "the transaction applied")
    finally:
        other.close()


@check
def unwatch_forgets_the_watch():
    k = key("unwatch")
    BF.create(k, 0.001, 1000)
    c, other = single(), client()
    try:
        expect(c.execute_command("WATCH", k) in (True, "OK"), "WATCH answers OK")
        expect(c.execute_command("UNWATCH") in (True, "OK"), "UNWATCH answers OK")
        other.execute_command("BF.ADD", k, "concurrent")
        c.execute_command("MULTI")
        c.execute_command("BF.ADD", k, "from-tx")
        expect_eq(c.execute_command("EXEC"), [1], "EXEC after UNWATCH")
    finally:
        c.close()
        other.close()


@check
def watch_missing_key_then_created():
    k = key("watch-missing")
    other = client()
    try:
        with R.pipeline() as pipe:
            pipe.watch(k)
            other.execute_command("BF.RESERVE", k, "0.01", "100")
            pipe.multi()
            pipe.execute_command("BF.ADD", k, "from-tx")
            try:
                res = pipe.execute()
            except WatchError:
                pass
            else:
                raise AssertionError(f"execute() returned {res!r}, want WatchError")
    finally:
        other.close()


@check
def error_inside_transaction_at_exec():
    k = key("tx-err")
    BF.create(k, 0.001, 1000)
    pipe = R.pipeline()
    pipe.execute_command("BF.ADD", k, "before")
    pipe.execute_command("BF.RESERVE", k, "0.01", "100")  # fails when EXEC runs it: item exists
    pipe.execute_command("BF.ADD", k, "after")
    res = pipe.execute(raise_on_error=False)
    expect_eq(len(res), 3, "EXEC replies")
    expect_eq(res[0], 1, "first command")
    expect(isinstance(res[1], ResponseError) and "item exists" in str(res[1]), f"second is an error: {res[1]!r}")
    expect_eq(res[2], 1, "third command still ran")
    expect_eq(R.execute_command("BF.MEXISTS", k, "before", "after"), [1, 1], "both adds applied")
    pipe = R.pipeline()
    pipe.execute_command("BF.ADD", k, "x")
    pipe.execute_command("BF.RESERVE", k, "0.01", "100")
    try:
        pipe.execute()
    except ResponseError as e:
        expect("item exists" in str(e), f"raised error names the cause: {e}")
    else:
        raise AssertionError("execute() with raise_on_error did not raise")


@check
def error_inside_transaction_at_queue_time():
    k = key("tx-abort")
    BF.create(k, 0.001, 1000)
    pipe = R.pipeline()
    pipe.execute_command("BF.ADD", k, "queued")
    pipe.execute_command("NO.SUCH.COMMAND", k)  # refused while queueing -> EXECABORT
    try:
        res = pipe.execute()
    except ResponseError as e:
        expect("unknown command" in str(e), f"error names the bad command: {e}")
    else:
        raise AssertionError(f"execute() returned {res!r}, want an error")
    expect_eq(R.execute_command("BF.EXISTS", k, "queued"), 0, "an aborted transaction applied nothing")
    c = single()
    try:
        c.execute_command("MULTI")
        expect_eq(c.execute_command("BF.ADD", k, "queued-2"), "QUEUED", "BF.ADD queued")
        expect_error(lambda: c.execute_command("NO.SUCH.COMMAND"), "unknown command", "unknown command in MULTI")
        try:
            got = c.execute_command("EXEC")
        except ExecAbortError as e:  # redis-py maps the EXECABORT prefix to this class
            expect("discarded because of previous errors" in str(e), f"EXECABORT text: {e}")
        else:
            raise AssertionError(f"EXEC after a queueing error returned {got!r}, want EXECABORT")
        expect_eq(c.execute_command("BF.EXISTS", k, "queued-2"), 0, "nothing applied after EXECABORT")
    finally:
        c.close()


@check
def module_command_arity_error_is_exec_time():
    # RedisBloom's commands are module commands: Redis queues them whatever their
    # argument count (COMMAND INFO arity -1) and the module refuses a bad count
    # when EXEC runs it, so the rest of the transaction still applies.
    k = key("tx-arity")
    BF.create(k, 0.001, 1000)
    pipe = R.pipeline()
    pipe.execute_command("BF.ADD", k, "queued")
    pipe.execute_command("BF.ADD", k)
    res = pipe.execute(raise_on_error=False)
    expect_eq(len(res), 2, "EXEC replies")
    expect_eq(res[0], 1, "first command")
    expect(isinstance(res[1], ResponseError) and "wrong number of arguments" in str(res[1]),
           f"second is the arity error: {res[1]!r}")
    expect_eq(R.execute_command("BF.EXISTS", k, "queued"), 1, "the valid command applied")


# ---------------------------------------------------------------- RESP3

@check
def resp3_protocol_3():
    params = inspect.signature(redis.Redis.__init__).parameters
    if "protocol" not in params:
        raise Skip(f"redis-py {redis.__version__} has no protocol=3 (RESP3 came in redis-py 5.0); "
                   "RESP3 is tested by redis_cli_test.sh instead")
    c = client(protocol=3)
    try:
        k = key("resp3")
        c.execute_command("BF.RESERVE", k, "0.01", "100")
        hello = c.execute_command("HELLO", "3")
        expect(isinstance(hello, dict), f"HELLO 3 is a map: {hello!r}")
        expect_eq(hello.get("proto"), 3, "HELLO 3 proto")
        info = c.execute_command("BF.INFO", k)
        # RedisBloom >= 2.6 answers a map; RedisBloom 2.4 keeps its flat array under RESP3
        if isinstance(info, list):
            info = dict(zip(info[::2], info[1::2]))
        expect(isinstance(info, dict) and info.get("Capacity") == 100, f"BF.INFO under RESP3: {info!r}")
        expect_eq(c.config_get("save"), {"save": ""}, "CONFIG GET save under RESP3")
        expect_eq(c.execute_command("CLIENT", "GETNAME"), None, "CLIENT GETNAME (null) under RESP3")
    finally:
        c.close()


# ---------------------------------------------------------------- keyspace

def make_filters(*names):
    ks = [key(n) for n in names]
    for k in ks:
        BF.create(k, 0.01, 100)
    return ks


@check
def keyspace_dbsize():
    before = R.dbsize()
    expect(isinstance(before, int) and before >= 0, f"DBSIZE is an integer: {before!r}")
    make_filters("dbs:1", "dbs:2", "dbs:3")
    expect_eq(R.dbsize(), before + 3, "DBSIZE after three new filters")


@check
def keyspace_exists():
    ks = make_filters("ex:a", "ex:b")
    expect_eq(R.exists(ks[0], ks[1], key("ex:missing")), 2, "EXISTS a b missing")
    expect_eq(R.exists(ks[0], ks[0]), 2, "EXISTS counts a repeated key twice")
    expect_eq(R.exists(key("ex:missing")), 0, "EXISTS of a missing key")


@check
def keyspace_type():
    (k,) = make_filters("type:a")
    expect_eq(R.type(k), BLOOM_TYPE, "TYPE of a bloom filter")
    expect_eq(R.type(key("type:missing")), "none", "TYPE of a missing key")


@check
def keyspace_keys():
    ks = make_filters("keys:a1", "keys:a2", "keys:b1")
    expect_eq(sorted(R.keys(key("keys:*"))), ks, "KEYS keys:*")
    expect_eq(sorted(R.keys(key("keys:a?"))), ks[:2], "KEYS keys:a?")
    expect_eq(R.keys(key("nothing-here:*")), [], "KEYS of a pattern with no match")


@check
def keyspace_scan_iter():
    ks = make_filters("scan:a1", "scan:a2", "scan:b1")
    got = sorted(R.scan_iter(match=key("scan:a*"), _type=BLOOM_TYPE))
    expect_eq(got, ks[:2], "scan_iter(match=scan:a*, _type=MBbloom--)")
    got = list(R.scan_iter(match=key("scan:*"), count=2))
    expect_eq(sorted(got), ks, "scan_iter(match=scan:*, count=2)")
    expect_eq(len(got), len(set(got)), "SCAN returned no key twice (no concurrent changes)")
    expect_eq(list(R.scan_iter(match=key("scan:*"), _type="string")), [], "scan_iter(_type=string)")
    cursor, batch = R.scan(0, match=key("scan:*"), count=1000)
    expect(isinstance(cursor, int) and isinstance(batch, list), f"SCAN reply [cursor, keys]: {cursor!r} {batch!r}")


@check
def keyspace_delete_unlink():
    ks = make_filters("del:a", "del:b", "del:c")
    BF.add(ks[0], "old")
    expect_eq(R.delete(ks[0], ks[1], key("del:missing")), 2, "DEL a b missing")
    expect_eq(R.exists(ks[0], ks[1]), 0, "EXISTS after DEL")
    expect_eq(R.unlink(ks[2], ks[2]), 1, "UNLINK c c")
    expect_eq(R.delete(ks[0]), 0, "DEL of a deleted key")
    BF.create(ks[0], 0.01, 100)  # a new, empty filter under the old name
    expect_eq(BF.exists(ks[0], "old"), 0, "the re-created filter does not hold the deleted one's items")
    with R.pipeline(transaction=True) as p:
        p.execute_command("BF.ADD", key("del:tx"), "x")
        p.delete(key("del:tx"))
        p.exists(key("del:tx"))
        expect_eq(p.execute(), [1, 1, 0], "BF.ADD, DEL, EXISTS in one transaction")


# ---------------------------------------------------------------- INFO and MODULE LIST

@check
def info_default_fields():
    info = R.info()
    missing = [f for f in ("redis_version", "tcp_port", "role", "used_memory", "loading") if f not in info]
    expect(not missing, f"INFO (default) lacks {missing}")
    expect_eq(info["tcp_port"], PORT, "INFO tcp_port")
    expect_eq(info["role"], "master", "INFO role")
    expect(isinstance(info["used_memory"], int) and info["used_memory"] > 0, "INFO used_memory > 0")
    expect_eq(info["loading"], 0, "INFO loading")


@check
def info_sections():
    wanted = {
        "server": ["redis_version", "redis_mode", "tcp_port", "uptime_in_seconds"],
        "clients": ["connected_clients"],
        "memory": ["used_memory", "used_memory_human"],
        "persistence": ["loading", "rdb_bgsave_in_progress", "aof_enabled"],
        "stats": ["total_connections_received", "total_commands_processed"],
        "replication": ["role", "connected_slaves"],
        "cpu": ["used_cpu_sys", "used_cpu_user"],
        "modules": ["modules"],
        "keyspace": ["db0"],
    }
    missing = []
    for section, fields in wanted.items():
        sec = R.info(section)
        lacking = [f for f in fields if f not in sec]
        if lacking:
            missing.append(f"{section}: {' '.join(lacking)}")
    expect(not missing, "INFO sections lack " + "; ".join(missing))
    expect(R.info("clients")["connected_clients"] >= 1, "connected_clients >= 1")
    mods = R.info("modules")["modules"]
    expect(any(isinstance(m, dict) and m.get("name") == "bf" for m in mods), f"INFO modules lists bf: {mods!r}")
    db0 = R.info("keyspace")["db0"]
    expect(isinstance(db0, dict) and db0.get("keys", 0) >= 1, f"INFO keyspace db0 keys >= 1: {db0!r}")
    expect_eq(db0["keys"], R.dbsize(), "INFO keyspace keys equals DBSIZE")


@check
def bf_scandump_loadchunk():
    # redis-py's bf().scandump()/loadchunk(): the iterator contract (start at
    # 0, stop when it comes back 0), bytes chunks, and RedisBloom's refusal to
    # load a dump over an existing filter. (A restore into a fresh node is in
    # the dispatcher tests: this suite has one server.)
    bf = BF
    k = key("dump")
    bf.create(k, 0.01, 1000)
    bf.madd(k, "a", "b", "c")
    chunks, it = [], 0
    for _ in range(10000):
        it, data = bf.scandump(k, it)
        if it == 0:
            break
        expect(isinstance(data, bytes) and len(data) > 0, f"chunk {it} is non-empty bytes")
        chunks.append((it, data))
    expect_eq(it, 0, "the scan ends with iterator 0")
    expect(len(chunks) >= 2, f"a header and data chunks: {len(chunks)}")
    expect_error(lambda: bf.loadchunk(k, chunks[0][0], chunks[0][1]), "received bad data",
                 "BF.LOADCHUNK over an existing filter")
    # The backup recipe: delete, then load the dump back under the same name.
    expect_eq(R.delete(k), 1, "DEL of the dumped filter")
    for it_, data in chunks:
        bf.loadchunk(k, it_, data)
    expect_eq(bf.mexists(k, "a", "b", "c"), [1, 1, 1], "the restored filter holds what was dumped")
    # The copy and migrate recipes: the dump loads under another name, and
    # RENAME keeps a filter's items.
    other = key("dump-elsewhere")
    for it_, data in chunks:
        bf.loadchunk(other, it_, data)
    expect_eq(bf.mexists(other, "a", "b", "c", "never-added"), [1, 1, 1, 0], "the dump loaded under another name")
    moved = key("dump-moved")
    expect_eq(R.rename(other, moved), True, "RENAME of the loaded filter")
    expect_eq(bf.mexists(moved, "a", "b", "c"), [1, 1, 1], "the renamed filter keeps its items")
    expect_eq(R.exists(other), 0, "the old name is gone")
    expect_error(lambda: bf.scandump(key("no-such-filter"), 0), "not found", "BF.SCANDUMP of a missing filter")


@check
def bf_scandump_loadchunk_100mib():
    # A backup of a filter over 16 MiB restores: every chunk SCANDUMP gives
    # fits the server's bulk limit (proto-max-bulk-len), so LOADCHUNK takes it
    # back. (Pollen once sent 16 MiB of words plus its 44-byte chunk header,
    # one more than its 16 MiB limit: the restore lost the connection.)
    bf = BF
    k = key("dump-100mib")
    R.execute_command("BF.RESERVE", k, 0.01, 90_000_000, "NONSCALING")
    size = R.execute_command("BF.INFO", k, "SIZE")
    size = size[0] if isinstance(size, list) else size
    expect(size >= 100 << 20, f"the filter holds at least 100 MiB: {size}")
    items = [f"https://example.com/{i}" for i in range(20_000)]
    for i in range(0, len(items), 1000):
        bf.madd(k, *items[i:i + 1000])
    limit = int(R.config_get("proto-max-bulk-len")["proto-max-bulk-len"])
    chunks, it = [], 0
    for _ in range(100_000):
        it, data = bf.scandump(k, it)
        if it == 0:
            break
        expect(len(data) <= limit, f"chunk {it} has {len(data)} bytes, over proto-max-bulk-len {limit}")
        chunks.append((it, data))
    expect_eq(it, 0, "the scan ends with iterator 0")
    expect_eq(R.delete(k), 1, "DEL of the dumped filter")
    for it_, data in chunks:
        bf.loadchunk(k, it_, data)
    restored = R.execute_command("BF.INFO", k, "SIZE")
    expect_eq(restored[0] if isinstance(restored, list) else restored, size, "the restored filter's size")
    got = []
    for i in range(0, len(items), 1000):
        got += bf.mexists(k, *items[i:i + 1000])
    expect_eq(sum(got), len(items), "every item reads as present after the restore")
    expect_eq(R.delete(k), 1, "DEL of the restored filter")


@check
def module_list_shows_bf():
    if not hasattr(R, "module_list"):
        print(f"  NOTE: redis-py {redis.__version__} has no module_list(); using MODULE LIST directly")
        mods = R.execute_command("MODULE", "LIST")
    else:
        mods = R.module_list()
    names = [m.get("name") for m in mods]
    expect("bf" in names, f"MODULE LIST names bf: {mods!r}")
    bf = mods[names.index("bf")]
    expect(isinstance(bf.get("ver"), int), f"module bf has an integer ver: {bf!r}")


def main():
    global passed, failed
    print(f"redis-py {redis.__version__} against {HOST}:{PORT} (key prefix {PFX})")
    for fn in CHECKS:
        try:
            fn()
        except Skip as e:
            print(f"skip {fn.__name__}: {e}")
            continue
        except Exception as e:  # one check's failure must not stop the others
            failed += 1
            msg = str(e) or type(e).__name__
            print(f"FAIL {fn.__name__}: {type(e).__name__}: {msg}")
            if not isinstance(e, (AssertionError, ResponseError, WatchError)):
                tb = traceback.extract_tb(e.__traceback__)
                here = [f for f in tb if f.filename == __file__]
                if here:
                    print(f"     at line {here[-1].lineno}: {here[-1].line}")
        else:
            passed += 1
            print(f"ok   {fn.__name__}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
