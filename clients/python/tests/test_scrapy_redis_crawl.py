"""PollenDupeFilter under a scrapy-redis-style scheduler: two crawler
processes share one request queue in a plain redis-server (REDIS_URL) and
deduplicate on a 3-node Pollen cluster (POLLEN_URLS). The scheduler is
redis_queue_scheduler.Scheduler, which calls the dupefilter exactly as
scrapy-redis's scheduler.py does (from_spider, request_seen, log, clear).

Also here: migration from scrapy-redis's RFPDupeFilter. Its SET of 100,000
fingerprints is imported with `pollenctl import`, and the same crawl with
POLLEN_FINGERPRINT = "scrapy-redis" then fetches nothing that was in it."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import redis
from scrapy import Request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cluster import Cluster  # noqa: E402
from pollen.scrapy import scrapy_redis_fingerprint  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from test_scrapy_crawl import PAGES, Site, finish, start_crawl  # noqa: E402

FILTER = "site:dupefilter"
QUEUE = "site:requests"


class ScrapyRedisCrawlTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster(3)
        self.queue = RedisServer()
        self.tmp = tempfile.mkdtemp(prefix="pollen-scrapy-redis-")
        self.site = None

    def tearDown(self):
        if self.site is not None:
            self.site.stop()
        self.queue.stop()
        self.cluster.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def settings(self, node_order, **extra):
        s = {"SCHEDULER": "redis_queue_scheduler.Scheduler", "REDIS_URL": self.queue.url,
             "POLLEN_URLS": [self.cluster.urls[i] for i in node_order]}
        s.update(extra)
        return s

    def reserve_everywhere(self, *extra):
        # As test_scrapy_crawl.py: the filter at every node before the crawl.
        redis.Redis(port=self.cluster.resp_ports[0]).execute_command("BF.RESERVE", FILTER, "0.001", "1000000", *extra)
        for port in self.cluster.resp_ports:
            Cluster._wait(lambda: redis.Redis(port=port).exists(FILTER) == 1, "the filter to spread")

    def crawl_two(self, settings_a, settings_b, start_b):
        """Two crawler processes at once, the second starting from page start_b."""
        paths = [os.path.join(self.tmp, "a.json"), os.path.join(self.tmp, "b.json")]
        starts = [self.site.start_url, self.site.start_url.replace("/p/0", "/p/%d" % start_b)]
        procs = [start_crawl(url, s, p) for url, s, p in zip(starts, [settings_a, settings_b], paths)]
        return [finish(proc, path) for proc, path in zip(procs, paths)]

    def test_two_processes_on_one_queue_fetch_each_page_once(self):
        # Each process asks its own node first; the filter is ROUTED, so two
        # nodes asked about one URL at once answer "new" once
        # (docs/routing.md). SCHEDULER_PERSIST: the first process to finish
        # must not clear the filter and queue under the other.
        self.site = Site()
        self.reserve_everywhere("ROUTED")
        a, b = self.crawl_two(self.settings([0, 1, 2], SCHEDULER_PERSIST=True),
                              self.settings([1, 2, 0], SCHEDULER_PERSIST=True), PAGES // 2)
        self.assertEqual(sorted(self.site.hits), list(range(PAGES)), "pages never fetched")
        self.assertEqual({p: n for p, n in self.site.hits.items() if n != 1}, {}, "pages fetched more than once")
        # Each page went through the shared queue once, whichever process
        # queued it and whichever took it (a process that finds the queue
        # empty at a moment closes: scrapy-redis's RedisSpider would idle).
        self.assertEqual(sum(s.get("scheduler/enqueued/redis", 0) for s in (a, b)), PAGES)
        self.assertEqual(sum(s.get("scheduler/dequeued/redis", 0) for s in (a, b)), PAGES)
        self.assertGreater(sum(s.get("dupefilter/filtered", 0) for s in (a, b)), PAGES)
        self.assertEqual(sum(s.get("downloader/request_count", 0) for s in (a, b)), PAGES)
        # Persisted: the filter is still at every node.
        for port in self.cluster.resp_ports:
            self.assertEqual(redis.Redis(port=port).exists(FILTER), 1)

    def test_a_node_killed_mid_crawl_changes_nothing(self):
        # Both processes use node 1 first, then nodes 2 and 3; WAIT 2 puts
        # every fingerprint on all three nodes before its request is queued.
        # Node 1 dies mid-crawl: both fail over to node 2, which holds every
        # fingerprint. Only the keys in flight at the kill can be fetched
        # twice (at most one per process here, CONCURRENT_REQUESTS = 1):
        # - an add whose reply was lost with the node cannot be vouched for
        #   (pollen.client): its key answers "not seen" (unvouched);
        # - a key answered "new" whose WAIT died with the node is added again
        #   at node 2 (rewaited), and the other process may ask node 2 for it
        #   first and be answered "new" too.
        # None is lost.
        killed = threading.Event()

        def kill_at(page):
            if page == PAGES // 3 and not killed.is_set():
                killed.set()
                self.cluster.kill(0)

        self.site = Site(on_page=kill_at)
        self.reserve_everywhere()
        common = dict(SCHEDULER_PERSIST=True, POLLEN_WAIT_REPLICAS=2, POLLEN_WAIT_TIMEOUT_MS=20000,
                      POLLEN_HOME_RETRY_SECONDS=3600, CONCURRENT_REQUESTS=1)
        a, b = self.crawl_two(self.settings([0, 1, 2], **common), self.settings([0, 1, 2], **common), PAGES // 2)
        self.assertTrue(killed.is_set())
        self.assertEqual(sorted(self.site.hits), list(range(PAGES)), "pages never fetched")
        in_flight = sum(s.get("pollen/unvouched_keys", 0) + s.get("pollen/rewaited_keys", 0) for s in (a, b))
        self.assertLessEqual(in_flight, 2)
        twice = {p: n for p, n in self.site.hits.items() if n != 1}
        self.assertLessEqual(len(twice), in_flight, "pages fetched more than once: %s" % twice)
        self.assertTrue(all(n == 2 for n in twice.values()), twice)
        self.assertGreaterEqual(sum(s.get("pollen/failovers", 0) for s in (a, b)), 1)

    def test_flush_at_close_deletes_the_filter_at_every_node(self):
        # scrapy-redis's default (SCHEDULER_PERSIST off): close() flushes,
        # the dupefilter's clear() deletes the filter, and DEL replicates.
        self.site = Site()
        self.reserve_everywhere()
        path = os.path.join(self.tmp, "one.json")
        stats = finish(start_crawl(self.site.start_url, self.settings([2, 0, 1]), path), path)
        self.assertEqual(stats.get("downloader/request_count"), PAGES)
        for port in self.cluster.resp_ports:
            Cluster._wait(lambda: redis.Redis(port=port).exists(FILTER) == 0, "the filter's deletion to spread")
        self.assertEqual(self.queue.client.exists(QUEUE), 0)

    def test_a_migrated_scrapy_redis_set_is_not_fetched_again(self):
        # scrapy-redis's dupefilter SET of an earlier crawl: the fingerprints
        # of pages 1..PAGES/2-1 plus fillers, 100,000 in all, in the queue's
        # Redis as RFPDupeFilter left it.
        self.site = Site()
        base = self.site.start_url[:-len("/p/0")]
        crawled = set(range(1, PAGES // 2))
        members = [scrapy_redis_fingerprint(Request("%s/p/%d" % (base, p))) for p in sorted(crawled)]
        members += ["%040x" % (0x5eed << 64 | i) for i in range(100_000 - len(members))]
        for start in range(0, len(members), 10_000):
            self.queue.client.sadd(FILTER, *members[start:start + 10_000])
        self.assertEqual(self.queue.client.scard(FILTER), 100_000)
        out = subprocess.run(
            [os.environ["POLLENCTL"], "--port", str(self.cluster.resp_ports[0]), "import", FILTER,
             "--from-redis", self.queue.url, "--set", FILTER, "--capacity", "1000000", "--error-rate", "0.001",
             "--state", os.path.join(self.tmp, "import.state")],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"^imported 100000 keys \(100000 new to the filter\) from redis://")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "import.state")))  # done: removed
        # The same crawl, now on Pollen with scrapy-redis's fingerprints.
        path = os.path.join(self.tmp, "after.json")
        stats = finish(start_crawl(self.site.start_url, self.settings([0, 1, 2], POLLEN_FINGERPRINT="scrapy-redis",
                                                                       SCHEDULER_PERSIST=True), path), path)
        fetched_again = crawled & set(self.site.hits)
        self.assertEqual(fetched_again, set(), "pages of the imported set fetched again")
        self.assertIn(0, self.site.hits)
        self.assertGreater(len(self.site.hits), 1)  # pages outside the set are fetched
        self.assertEqual({p: n for p, n in self.site.hits.items() if n != 1}, {})
        self.assertGreater(stats.get("dupefilter/filtered", 0), 0)


if __name__ == "__main__":
    unittest.main()
