"""Two real Crawlee crawler processes (CheerioCrawler from npm, installed in
clients/node/node_modules by .ci/deps.sh) crawl one local site at the same
time, from different start pages, each with its own in-memory storage,
sharing only a real 3-node Pollen cluster (each at its own node, a routed
filter): every page is fetched exactly once between them, both do real
work, and each drops pages the other had found. A third crawl afterwards
fetches nothing: the seen-set outlives the crawls.

The cluster and the site are the Python client's test harness
(clients/python/tests/cluster.py, test_scrapy_crawl.Site), imported as they
are. POLLEND names the pollend binary (ctest sets it); NODE the node binary
(default: node on PATH)."""
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PACKAGE, "..", "python", "tests"))
from cluster import Cluster  # noqa: E402
from test_scrapy_crawl import PAGES, Site  # noqa: E402

FILTER = "crawlee:seen"


def node_binary():
    node = os.environ.get("NODE") or shutil.which("node")
    if not node:
        raise RuntimeError("no node binary: run bash .ci/deps.sh (installs nodejs and npm)")
    if not os.path.isdir(os.path.join(PACKAGE, "node_modules", "@crawlee", "cheerio")):
        raise RuntimeError("clients/node/node_modules lacks @crawlee/cheerio: run bash .ci/deps.sh "
                           "(or npm ci in clients/node)")
    return node


class Crawl:
    """One `node crawl.mjs` process."""

    def __init__(self, tmp, name, start_url, urls, wait=True):
        self.stats_out = os.path.join(tmp, name + ".json")
        self.log_path = os.path.join(tmp, name + ".log")
        storage = os.path.join(tmp, name + "-storage")  # nothing should be written there
        job = {"start_url": start_url, "urls": urls, "filter": FILTER, "stats_out": self.stats_out,
               "no_wait": not wait}
        env = dict(os.environ, CRAWLEE_STORAGE_DIR=storage, CRAWLEE_PERSIST_STORAGE="false")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([node_binary(), os.path.join(HERE, "crawl.mjs"), json.dumps(job)],
                                     cwd=PACKAGE, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                if line.strip() == "ready":
                    return
                if line == "":
                    break  # exited
        raise AssertionError("the crawler did not get ready:\n" + self.output())

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=300):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the crawler did not finish within %d s:\n%s" % (timeout, self.output()))
        finally:
            self.close_files()
        if self.proc.returncode != 0:
            raise AssertionError("the crawler failed (exit %d):\n%s" % (self.proc.returncode, self.output()))
        with open(self.stats_out) as f:
            return json.load(f)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close_files()

    def close_files(self):
        for f in (self.proc.stdin, self.proc.stdout, self.log):
            try:
                f.close()
            except OSError:
                pass  # a broken pipe to a process that is gone

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()[-4000:]


class CrawleeCrawlTest(unittest.TestCase):
    def setUp(self):
        node_binary()  # fail early, with what to run
        self.cluster = Cluster(3)
        self.tmp = tempfile.mkdtemp(prefix="pollen-crawlee-")
        self.crawls = []

    def tearDown(self):
        for c in self.crawls:
            c.kill()
        self.cluster.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def reserve_everywhere(self, *extra):
        # The crawl's filter exists at every node before the crawl starts, as
        # an operator would set it up (keys added in the first moments after a
        # filter is created reach the other nodes only by anti-entropy).
        import redis
        with redis.Redis(port=self.cluster.resp_ports[0]) as r:
            r.execute_command("BF.RESERVE", FILTER, "0.001", "1000000", *extra)
        for port in self.cluster.resp_ports:
            with redis.Redis(port=port) as r:
                Cluster._wait(lambda: r.exists(FILTER) == 1, "the filter to spread")

    def node_order(self, first):
        urls = self.cluster.urls
        return [urls[first]] + [u for i, u in enumerate(urls) if i != first]

    def test_two_crawler_processes_fetch_each_page_once(self):
        site = Site()
        try:
            self.reserve_everywhere("ROUTED")
            base = site.start_url.rsplit("/p/", 1)[0]
            starts = [base + "/p/0", base + "/p/%d" % (PAGES // 2)]
            t0 = time.monotonic()
            self.crawls = [Crawl(self.tmp, "crawl%d" % i, starts[i], self.node_order(i)) for i in range(2)]
            for c in self.crawls:
                c.wait_ready()
            t_ready = time.monotonic()
            for c in self.crawls:
                c.go()
            stats = [c.finish() for c in self.crawls]
            t_done = time.monotonic()

            self.assertEqual(sorted(site.hits), list(range(PAGES)), "pages never fetched")
            twice = {p: n for p, n in site.hits.items() if n != 1}
            self.assertEqual(twice, {}, "pages fetched more than once")
            fetched = [len(s["fetched"]) for s in stats]
            self.assertEqual(sum(fetched), PAGES)
            self.assertEqual(len(set(stats[0]["fetched"]) & set(stats[1]["fetched"])), 0)
            for s in stats:
                self.assertEqual(s["failed"], [])
                self.assertEqual(s["failovers"], 0)
                self.assertEqual(s["unvouched"], 0)
            # Both did real work, and each dropped pages the other had found.
            self.assertGreater(min(fetched), PAGES // 10, "one crawler did (almost) nothing: %s" % json.dumps(
                [{k: v for k, v in s.items() if k != "fetched"} for s in stats]))
            dropped = [s["queue"]["dropped"] for s in stats]
            self.assertGreater(min(dropped), 0, "no duplicate dropped: %s" % dropped)
            # What each kept is what it fetched: nothing seen elsewhere entered its queue.
            for s, n in zip(stats, fetched):
                self.assertEqual(s["new_keys"], n)
            print("crawlee: %d pages, fetched %s by the two processes (each once), duplicates dropped by Pollen %s, "
                  "start-up %.1f s, crawl %.1f s (%s s in-process, first fetch after %s ms)"
                  % (PAGES, fetched, dropped, t_ready - t0, t_done - t_ready, [s["seconds"] for s in stats],
                     [s["first_fetch_ms"] for s in stats]))

            # The seen-set outlives the crawls: a third crawl finds every page seen.
            again = Crawl(self.tmp, "again", starts[0], self.node_order(2), wait=False)
            self.crawls.append(again)
            third = again.finish()
            self.assertEqual(third["fetched"], [])
            self.assertEqual(third["queue"]["dropped"], 1)
            self.assertEqual(sorted(site.hits.values()), [1] * PAGES)
        finally:
            site.stop()


if __name__ == "__main__":
    unittest.main()
