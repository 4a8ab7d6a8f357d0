#!/usr/bin/env python3
"""Runs bench_filter and prints each figure as a ratio to its same-run baseline.

  python3 bench/crdt/ratios.py build/bench/crdt/bench_filter [extra benchmark flags]

Repetitions are interleaved at random (--benchmark_enable_random_interleaving)
so that load changes on a shared machine hit baseline and subject alike; the
medians of CPU time per key are compared. Baselines: BM_SipHash (the inlined SipHash-2-4 the filter
uses), BM_SipHashSodium (libsodium's crypto_shorthash), BM_SipHashMany (the 8-lane
AVX-512 batch hash the batch forms use), BM_Plain* (an unblocked
Bloom filter of the same size and k) and BM_RandomLineFloor (random cache-line
loads of 1 GiB with the batch pipeline's prefetching, no hashing).
"""
import json
import subprocess
import sys

SIZES = {"0": "64 KiB", "1": "8 MiB", "2": "1 GiB"}
# Single-threaded figures (the 2-thread runs are read from the raw output).
FILTER = "threads:1$|BM_GenerationSetTestMany"
BATCH = 16  # keys per iteration of the batch benchmarks (kBatch in filter_bench.cc)


def run(binary, extra):
    cmd = [binary, "--benchmark_format=json", "--benchmark_repetitions=5",
           "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true",
           "--benchmark_min_time=0.2",
           "--benchmark_filter=" + FILTER] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        if b["time_unit"] != "ns":
            continue
        # CPU time: on a shared machine, time sliced away from the benchmark
        # thread inflates real time but not CPU time (stalls on memory count).
        ns = b["cpu_time"]
        if "items_per_second" in b:
            ns /= BATCH  # per key for the batch forms
        medians[name] = ns
    return medians


def key(bench, size, length):
    return f"{bench}/{size}/{length}/real_time/threads:1"


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    m = run(sys.argv[1], sys.argv[2:])
    floor = m.get("BM_RandomLineFloor/real_time/threads:1")
    for length in ("16", "64"):
        sip = m.get(key("BM_SipHash", 0, length))
        sodium = m.get(key("BM_SipHashSodium", 0, length))
        many = m.get(key("BM_SipHashMany", 0, length))
        if sip is None:
            continue
        print(f"\n{length}-byte keys: SipHash inlined {sip:.1f} ns, libsodium {sodium:.1f} ns, "
              f"batch (SipHashMany) {many:.1f} ns/key")
        print(f"{'figure':34} {'size':>7} {'ns/key':>8} {'/SipHash':>9} {'/sodium':>8} {'-SipHash':>9} {'plain/this':>10}")
        for bench, plain in (("BM_TestMember", "BM_PlainTestMember"), ("BM_TestMemberPortable", None),
                             ("BM_TestNonMember", "BM_PlainTestNonMember"), ("BM_AddPresent", None),
                             ("BM_TestAndAddNew", "BM_PlainAdd"), ("BM_TestManyMember", "BM_PlainTestManyMember"),
                             ("BM_TestManyNonMember", "BM_PlainTestManyNonMember"), ("BM_AddManyPresent", None)):
            for size in ("0", "1", "2"):
                ns = m.get(key(bench, size, length))
                if ns is None:
                    continue
                p = m.get(key(plain, size, length)) if plain else None
                ratio = f"{p / ns:10.2f}" if p else " " * 10
                print(f"{bench:34} {SIZES[size]:>7} {ns:8.1f} {ns / sip:9.2f} {ns / sodium:8.2f} {ns - sip:9.1f} {ratio}")
    if floor:
        print(f"\nrandom 1 GiB cache line with the batch prefetch pipeline (floor): {floor:.1f} ns")
    gs = m.get("BM_GenerationSetTestMany/real_time")
    if gs:
        print(f"GenerationSet::MightContainMany, 16-byte keys, 2 generations: {gs:.1f} ns/key")
    return 0


if __name__ == "__main__":
    sys.exit(main())
