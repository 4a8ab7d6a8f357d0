"""Real Scrapy crawls (Debian's python3-scrapy) of a local site, served by
this test, deduplicated by pollen.scrapy.PollenDupeFilter on a real 3-node
cluster: every page fetched once, duplicates skipped; a node killed
mid-crawl loses no page (the one request in flight may fetch its page
twice); two crawlers at two nodes on a routed filter
fetch each page once between them."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PAGES = 300
LINKS = 12  # per page: the site links each page about LINKS times


class Site:
    """Pages /p/0 .. /p/PAGES-1, each linking to LINKS others (and to /p/0):
    every page is reachable from /p/0 and linked many times over."""

    def __init__(self, on_page=None):
        self.hits = {}
        self.lock = threading.Lock()
        self.on_page = on_page  # called with the page number before it is served
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = self.path.strip("/").split("/")
                if len(parts) != 2 or parts[0] != "p" or not parts[1].isdigit() or int(parts[1]) >= PAGES:
                    self.send_error(404)
                    return
                n = int(parts[1])
                with site.lock:
                    site.hits[n] = site.hits.get(n, 0) + 1
                if site.on_page:
                    site.on_page(n)
                links = ["/p/0"] + ["/p/%d" % ((n * 7 + j * 31 + 1) % PAGES) for j in range(LINKS)]
                links.append("/p/%d" % ((n + 1) % PAGES))  # a chain through every page
                body = "<html><body>%s</body></html>" % "".join('<a href="%s">x</a>' % l for l in links)
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.start_url = "http://127.0.0.1:%d/p/0" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def start_crawl(start_url, settings, stats_out):
    job = {"start_url": start_url, "settings": settings, "stats_out": stats_out}
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, os.path.join(HERE, "crawl_spider.py"), json.dumps(job)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc, stats_out):
    out, _ = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise AssertionError("crawl failed (exit %d):\n%s" % (proc.returncode, out[-4000:]))
    with open(stats_out) as f:
        return json.load(f)


class ScrapyCrawlTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster(3)
        self.tmp = tempfile.mkdtemp(prefix="pollen-scrapy-")

    def reserve_everywhere(self, *extra):
        # The crawl's filter exists at every node before the crawl starts, as
        # an operator would set it up. (Keys added in the first moments after
        # a filter is created reach the other nodes only by anti-entropy,
        # seconds later: see the note on issue 13.)
        import redis
        redis.Redis(port=self.cluster.resp_ports[0]).execute_command(
            "BF.RESERVE", "site:dupefilter", "0.001", "1000000", *extra)
        for port in self.cluster.resp_ports:
            Cluster._wait(lambda: redis.Redis(port=port).exists("site:dupefilter") == 1, "the filter to spread")

    def tearDown(self):
        self.cluster.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def crawl(self, site, settings, name="stats"):
        path = os.path.join(self.tmp, name + ".json")
        return finish(start_crawl(site.start_url, settings, path), path)

    def assert_every_page_once(self, site):
        self.assertEqual(sorted(site.hits), list(range(PAGES)), "pages never fetched")
        twice = {p: n for p, n in site.hits.items() if n != 1}
        self.assertEqual(twice, {}, "pages fetched more than once")

    def test_every_page_fetched_once_and_a_second_crawl_fetches_nothing_new(self):
        site = Site()
        self.reserve_everywhere()
        try:
            stats = self.crawl(site, {"REDIS_URL": self.cluster.urls[0]})
            self.assert_every_page_once(site)
            self.assertGreater(stats.get("dupefilter/filtered", 0), PAGES)  # duplicates skipped
            # The seen-set outlives the crawl: a new crawl finds every page seen.
            again = self.crawl(site, {"REDIS_URL": self.cluster.urls[1]}, "again")
            self.assert_every_page_once(site)
            self.assertEqual(again.get("downloader/request_count", 0), 0)
        finally:
            site.stop()

    def test_a_node_killed_mid_crawl_loses_nothing(self):
        killed = threading.Event()

        def kill_at(page):
            # Mid-crawl, while Scrapy waits for this page, its node dies.
            # WAIT 2: the node the crawl moves to holds every fingerprint.
            if page == PAGES // 3 and not killed.is_set():
                killed.set()
                self.cluster.kill(0)

        site = Site(on_page=kill_at)
        self.reserve_everywhere()
        try:
            # WAIT's timeout is generous: a WAIT 2 cut short before the kill
            # would leave a key at the killed node alone. No try to go back
            # to the dead node: on a loaded machine the crawl outlasts the
            # default 30 s, and each failed try counts as a failover.
            stats = self.crawl(site, {"POLLEN_URLS": self.cluster.urls,
                                      "POLLEN_WAIT_REPLICAS": 2, "POLLEN_WAIT_TIMEOUT_MS": 20000,
                                      "POLLEN_HOME_RETRY_SECONDS": 3600, "CONCURRENT_REQUESTS": 1})
            self.assertTrue(killed.is_set())
            self.assertEqual(stats.get("pollen/failovers"), 1)
            # Scrapy handles a page's links while it downloads the next page,
            # so a dupefilter request may be in flight when the node dies
            # (seen in CI: page 74, twice). The client cannot know whether
            # that key was added before, so it answers "not seen" and counts
            # it unvouched (clients/python/README.md): at most one such key,
            # its page fetched at most twice. Every other page once.
            unvouched = stats.get("pollen/unvouched_keys")
            self.assertLessEqual(unvouched, 1)
            self.assertEqual(sorted(site.hits), list(range(PAGES)), "pages never fetched")
            twice = {p: n for p, n in site.hits.items() if n != 1}
            self.assertLessEqual(len(twice), unvouched, "pages fetched more than once: %s" % twice)
            self.assertTrue(all(n == 2 for n in twice.values()), twice)
            # Every WAIT 2 after the kill is short: one peer is left.
            self.assertGreater(stats.get("pollen/short_waits"), 0)
        finally:
            site.stop()

    def test_two_crawlers_at_two_nodes_on_a_routed_filter_fetch_each_page_once(self):
        site = Site()
        try:
            self.reserve_everywhere("ROUTED")
            paths = [os.path.join(self.tmp, "a.json"), os.path.join(self.tmp, "b.json")]
            crawls = [start_crawl(site.start_url, {"REDIS_URL": self.cluster.urls[i], "POLLEN_ROUTED": True}, paths[i])
                      for i in range(2)]
            stats = [finish(c, p) for c, p in zip(crawls, paths)]
            self.assert_every_page_once(site)
            fetched = sum(s.get("downloader/request_count", 0) for s in stats)
            self.assertEqual(fetched, PAGES)
        finally:
            site.stop()


if __name__ == "__main__":
    unittest.main()
