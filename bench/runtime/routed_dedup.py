#!/usr/bin/env python3
"""Duplicate-new rate and add latencies of concurrent crawlers (issue 12).

One crawler thread per endpoint; key k is added by `copies` consecutive
crawlers (k, k+1, ... mod endpoints), all walking the keys in the same order,
so the adds of one key land within a few milliseconds of each other. Reports
the keys answered new more than once, then the add latency (client-measured,
including this script's own overhead) for keys answered new and, in a second
pass over the same keys, for keys already present.

  routed_dedup.py FILTER KEYS COPIES HOST:PORT [HOST:PORT ...]
"""
import socket
import sys
import threading
import time


def resp_command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Client:
    def __init__(self, endpoint):
        host, port = endpoint.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def integer(self, *args):
        self.sock.sendall(resp_command(*args))
        line = self.line()
        if not line.startswith(b":"):
            raise RuntimeError("unexpected reply %r to %r" % (line, args))
        return int(line[1:])


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    filt, keys, copies, endpoints = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    tag = "%x" % time.time_ns()
    answers = {}  # key -> [replies]
    lat_new, lat_old, lat_present = [], [], []
    lock = threading.Lock()
    start = threading.Barrier(len(endpoints))

    def crawl(i, second_pass):
        c = Client(endpoints[i])
        start.wait()
        for k in range(keys):
            if (i - k) % len(endpoints) >= copies:
                continue
            key = "https://%s.example/%d" % (tag, k)
            t0 = time.perf_counter_ns()
            r = c.integer("BF.ADD", filt, key)
            us = (time.perf_counter_ns() - t0) / 1000
            with lock:
                if second_pass:
                    lat_present.append(us)
                else:
                    answers.setdefault(k, []).append(r)
                    (lat_new if r == 1 else lat_old).append(us)

    for second_pass in (False, True):
        threads = [threading.Thread(target=crawl, args=(i, second_pass)) for i in range(len(endpoints))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    dup = sum(1 for r in answers.values() if sum(r) > 1)
    never = sum(1 for r in answers.values() if sum(r) == 0)
    print("%-10s endpoints=%d keys=%d copies=%d duplicate-new %d (rate %.4f) never-new %d | "
          "add latency us: new p50 %.0f p99 %.0f (%d), not-new p50 %.0f p99 %.0f (%d), present p50 %.0f p99 %.0f (%d)" % (
              filt, len(endpoints), len(answers), copies, dup, dup / max(1, len(answers)), never,
              percentile(lat_new, .5), percentile(lat_new, .99), len(lat_new),
              percentile(lat_old, .5), percentile(lat_old, .99), len(lat_old),
              percentile(lat_present, .5), percentile(lat_present, .99), len(lat_present)))


if __name__ == "__main__":
    main()
