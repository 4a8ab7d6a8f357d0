#!/usr/bin/env python3
"""A routed add's latency against one loopback round trip (issue 12).

From one client at the first endpoint, N rounds of three requests each, in
turn so that all three see the same machine: PING (a loopback round trip to
the node, the baseline), BF.ADD of a new key to a plain filter (a local
add), BF.ADD of a new key to a routed filter (decided by the key's owner:
one more round trip, node to owner, unless the owner is this node, for
1/NODES of the keys). Issue 12's target is a routed new-key add's p99 at
most one loopback round trip plus 100 us over the local add's, which is
the figure printed last ("over budget" when it is missed), with the
round trip taken as the smaller p50 of the PING and of the local add. Latencies are
client-measured microseconds, this script's own overhead included in each.

  routed_latency.py ROUTED_FILTER PLAIN_FILTER N HOST:PORT
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from routed_dedup import Client, percentile, resp_command  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    routed, plain, n, endpoint = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    tag = "%x" % time.time_ns()
    c = Client(endpoint)
    ping, local, remote = [], [], []
    new_local = new_routed = 0
    for k in range(n):
        t0 = time.perf_counter_ns()
        c.sock.sendall(resp_command("PING"))
        if c.line() != b"+PONG":
            raise RuntimeError("PING")
        t1 = time.perf_counter_ns()
        new_local += c.integer("BF.ADD", plain, "l-%s-%d" % (tag, k))
        t2 = time.perf_counter_ns()
        new_routed += c.integer("BF.ADD", routed, "r-%s-%d" % (tag, k))
        t3 = time.perf_counter_ns()
        ping.append((t1 - t0) / 1000)
        local.append((t2 - t1) / 1000)
        remote.append((t3 - t2) / 1000)
    if new_local != n or new_routed != n:
        raise RuntimeError("expected every key new: local %d routed %d of %d" % (new_local, new_routed, n))
    # The round trip: the smaller p50 of a PING and of a local add (both are
    # one client round trip; the first request of a round pays a little more).
    rtt = min(percentile(ping, .5), percentile(local, .5))
    extra = percentile(remote, .99) - percentile(local, .99)
    budget = rtt + 100
    print("%-10s sequential, %d rounds: PING p50 %.0f p99 %.0f | local add (new) p50 %.0f p99 %.0f | "
          "routed add (new) p50 %.0f p99 %.0f | routed p99 - local p99 = %.0f us, budget (1 RTT %.0f + 100) %.0f: %s" % (
              routed, n, rtt, percentile(ping, .99), percentile(local, .5), percentile(local, .99),
              percentile(remote, .5), percentile(remote, .99), extra, rtt, budget,
              "met" if extra <= budget else "over budget"))


if __name__ == "__main__":
    main()
