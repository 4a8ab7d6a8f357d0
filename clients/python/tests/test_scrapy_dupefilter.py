"""pollen.scrapy.PollenDupeFilter without a cluster: its fingerprints (pinned
values), which nodes it uses, and the names its constructors give the filter
(Scrapy's from_crawler, scrapy-redis's from_spider and from_settings)."""
import os
import sys
import time
import unittest

from scrapy import Request, Spider
from scrapy.settings import Settings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pollen.scrapy import PollenDupeFilter, node_urls, scrapy_redis_fingerprint  # noqa: E402


def settings(**values):
    return Settings(values)


class Fingerprints(unittest.TestCase):
    # Scrapy's fingerprint() (2.7 and later) and scrapy-redis's (0.8 and
    # later; values checked against scrapy_redis.dupefilter.RFPDupeFilter of
    # rmax/scrapy-redis master, 2026-05-19) differ for the same request: a
    # crawl that switches from one to the other fetches everything again.
    GET = Request("http://www.example.com/query?id=111&cat=222")
    POST = Request("https://example.com/a b", method="POST", body=b"x=1&y=\xff")

    def filter_with(self, kind):
        return PollenDupeFilter(seen_set=None, fingerprint=kind)

    def test_scrapy_fingerprints_are_pinned(self):
        df = self.filter_with("scrapy")
        self.assertEqual(df.request_fingerprint(self.GET), "8fcf173c15d0d14f77c0c9a61209caf224e90164")
        self.assertEqual(df.request_fingerprint(self.POST), "7f664bd368e813400ab099e308497df5b9a12985")

    def test_scrapy_redis_fingerprints_are_pinned(self):
        df = self.filter_with("scrapy-redis")
        self.assertEqual(df.request_fingerprint(self.GET), "5ef1f101096e9b6c0b1bb1816d012333e3fff63d")
        self.assertEqual(df.request_fingerprint(self.POST), "dbe0803feb879d321165bf5dcf6d5ed2f758f04d")

    def test_scrapy_redis_fingerprints_use_the_canonical_url(self):
        # Query order and fragment do not count, the method and body do.
        same = Request("http://www.example.com/query?cat=222&id=111#fragment")
        self.assertEqual(scrapy_redis_fingerprint(same), scrapy_redis_fingerprint(self.GET))
        head = Request(self.GET.url, method="HEAD")
        self.assertNotEqual(scrapy_redis_fingerprint(head), scrapy_redis_fingerprint(self.GET))

    def test_an_unknown_kind_is_refused(self):
        with self.assertRaisesRegex(ValueError, "POLLEN_FINGERPRINT must be one of scrapy, scrapy-redis"):
            self.filter_with("sha1")


class Nodes(unittest.TestCase):
    def test_pollen_urls_win_over_redis_url(self):
        # Under scrapy-redis, REDIS_URL is the Redis of the queue.
        s = settings(REDIS_URL="redis://queue:6379", POLLEN_URLS="redis://a:1, redis://b:2")
        self.assertEqual(node_urls(s), ["redis://a:1", "redis://b:2"])
        s = settings(REDIS_URL="redis://queue:6379", POLLEN_URL="redis://a:1", POLLEN_URLS=["redis://b:2", "redis://a:1"])
        self.assertEqual(node_urls(s), ["redis://a:1", "redis://b:2"])

    def test_redis_url_is_the_node_when_no_pollen_setting_is_given(self):
        self.assertEqual(node_urls(settings(REDIS_URL="redis://n:7")), ["redis://n:7"])
        self.assertEqual(node_urls(settings()), ["redis://127.0.0.1:6379"])


class Spiderish(Spider):
    name = "site"


class Constructors(unittest.TestCase):
    BASE = {"POLLEN_URLS": ["redis://127.0.0.1:1"], "POLLEN_FINGERPRINT": "scrapy-redis"}

    def test_from_spider_names_the_filter_as_scrapy_redis_does(self):
        spider = Spiderish()
        spider.settings = settings(**self.BASE)
        df = PollenDupeFilter.from_spider(spider)
        self.assertEqual(df.seen_set.filter, "site:dupefilter")
        self.assertEqual(df.seen_set.urls, ["redis://127.0.0.1:1"])
        self.assertEqual(df.fingerprint, "scrapy-redis")
        spider.settings = settings(SCHEDULER_DUPEFILTER_KEY="crawl:%(spider)s:seen", **self.BASE)
        self.assertEqual(PollenDupeFilter.from_spider(spider).seen_set.filter, "crawl:site:seen")

    def test_from_settings_names_the_filter_by_a_timestamp(self):
        before = int(time.time())
        name = PollenDupeFilter.from_settings(settings(**self.BASE)).seen_set.filter
        self.assertRegex(name, r"^dupefilter:\d+$")
        self.assertGreaterEqual(int(name.split(":")[1]), before)
        name = PollenDupeFilter.from_settings(settings(DUPEFILTER_KEY="df-%(timestamp)s", **self.BASE)).seen_set.filter
        self.assertRegex(name, r"^df-\d+$")

    def test_nothing_is_contacted_before_the_first_request(self):
        # Port 1 has no server: building and naming must not connect.
        spider = Spiderish()
        spider.settings = settings(**self.BASE)
        df = PollenDupeFilter.from_spider(spider)
        self.assertIsNone(df.seen_set._conn)


if __name__ == "__main__":
    unittest.main()
