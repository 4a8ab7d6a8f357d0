#!/usr/bin/env python3
"""WAIT and POLLEN.QEXISTS latencies on a cluster (issue 12).

From one client at the first endpoint: N times, BF.ADD a new key and then
WAIT REPLICAS TIMEOUT (the latency of WAIT alone, and its answers); then,
N times, BF.ADD a new key at the second endpoint and at once ask the first
with POLLEN.QEXISTS FILTER REPLICAS key (and, as the baseline in the same
run, BF.EXISTS at the first: a local read, which misses the key until
gossip brings it). Latencies are client-measured microseconds.

  wait_latency.py FILTER N REPLICAS HOST:PORT HOST:PORT [...]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from routed_dedup import Client, percentile, resp_command  # noqa: E402


def array_of_integers(client, *args):
    client.sock.sendall(resp_command(*args))
    head = client.line()
    if not head.startswith(b"*"):
        raise RuntimeError("unexpected reply %r to %r" % (head, args))
    return [int(client.line()[1:]) for _ in range(int(head[1:]))]


def timed(fn):
    t0 = time.perf_counter_ns()
    r = fn()
    return r, (time.perf_counter_ns() - t0) / 1000


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    filt, n, replicas, endpoints = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    tag = "%x" % time.time_ns()
    first, second = Client(endpoints[0]), Client(endpoints[1])
    waits, counts = [], {}
    for k in range(n):
        first.integer("BF.ADD", filt, "w-%s-%d" % (tag, k))
        r, us = timed(lambda: first.integer("WAIT", replicas, "1000"))
        waits.append(us)
        counts[r] = counts.get(r, 0) + 1
    qexists, local, found_q, found_local = [], [], 0, 0
    for k in range(n):
        key = "q-%s-%d" % (tag, k)
        second.integer("BF.ADD", filt, key)
        r, us = timed(lambda: first.integer("BF.EXISTS", filt, key))
        local.append(us)
        found_local += r
        r, us = timed(lambda: array_of_integers(first, "POLLEN.QEXISTS", filt, replicas, key))
        qexists.append(us)
        found_q += r[0]
    print("%-10s WAIT %s: p50 %.0f p99 %.0f max %.0f us, answers %s | key added at a peer just before: "
          "BF.EXISTS found %d/%d (p50 %.0f p99 %.0f us), POLLEN.QEXISTS %s found %d/%d (p50 %.0f p99 %.0f us)" % (
              filt, replicas, percentile(waits, .5), percentile(waits, .99), max(waits),
              dict(sorted(counts.items())), found_local, n, percentile(local, .5), percentile(local, .99),
              replicas, found_q, n, percentile(qexists, .5), percentile(qexists, .99)))


if __name__ == "__main__":
    main()
