"""A Scrapy dupefilter on Pollen: scrapy-redis's RFPDupeFilter, with a Bloom
filter replicated across nodes in place of one Redis SET.

It works under Scrapy's own scheduler and under scrapy-redis's
(`SCHEDULER = "scrapy_redis.scheduler.Scheduler"`, which keeps the request
queue in Redis). Switching is one line in settings.py plus where the nodes are:

    DUPEFILTER_CLASS = "pollen.scrapy.PollenDupeFilter"
    POLLEN_URLS = ["redis://127.0.0.1:6380", "redis://10.0.0.2:6380"]

Settings (scrapy-redis's names where they mean the same):
    POLLEN_URL, POLLEN_URLS    the Pollen nodes, local node first, the others
                               to fail over to in order (POLLEN_URLS: a list,
                               or a comma-separated string). When either is
                               given, REDIS_URL is not used here: under
                               scrapy-redis it is the Redis of the queue.
    REDIS_URL                  the node when neither is given (default
                               "redis://127.0.0.1:6379")
    SCHEDULER_DUPEFILTER_KEY   the filter's name, a template over the spider's
                               name (default "%(spider)s:dupefilter")
    DUPEFILTER_KEY             the name when only settings are known (the
                               from_settings constructor, no spider), a template
                               over a timestamp (default
                               "dupefilter:%(timestamp)s", as scrapy-redis)
    POLLEN_FINGERPRINT         how a request becomes a key: "scrapy" (default:
                               the crawler's request fingerprinter, Scrapy's
                               fingerprint()) or "scrapy-redis" (scrapy-redis's
                               own, since 0.8: SHA1 of method, canonical URL and
                               body). A crawl moving from scrapy-redis's
                               RFPDupeFilter with its SET imported (`pollenctl
                               import`) must keep "scrapy-redis", or it fetches
                               everything again.
    DUPEFILTER_DEBUG           log every filtered request, not only the first
    POLLEN_ERROR_RATE          the filter's false-positive rate if this creates
    POLLEN_CAPACITY            it (defaults 0.001 and 10,000,000); an existing
                               filter is used as it is
    POLLEN_ROUTED              create it ROUTED: crawlers at different nodes
                               adding the same URL at once fetch it once
                               (default False; docs/routing.md)
    POLLEN_WAIT_REPLICAS       WAIT for this many other nodes after each add
                               (default 0): a node that dies takes no
                               fingerprint with it
    POLLEN_WAIT_TIMEOUT_MS     WAIT's timeout (default 1000)
    POLLEN_HOME_RETRY_SECONDS  after failing over, how often to try the first
                               node again (default 30; a try that fails
                               counts as another failover)

The filter is created (BF.RESERVE) before the first key is added, whichever
scheduler built the dupefilter (scrapy-redis's never calls open()). clear(),
which scrapy-redis's scheduler calls at close unless SCHEDULER_PERSIST is set,
deletes the filter at every node (DEL replicates). Unlike scrapy-redis's
RFPDupeFilter, close() under Scrapy's scheduler keeps the filter: a crawl's
seen-set outlives the process, which is what it is for.

A false positive of the filter (POLLEN_ERROR_RATE) skips a request that was
never fetched; a node failing mid-request answers its keys "not seen"
(pollen.client.SeenSet), so a request may then be fetched twice, never lost.
"""
import hashlib
import json
import logging
import time

from scrapy.dupefilters import BaseDupeFilter

from pollen.client import SeenSet

logger = logging.getLogger(__name__)

DEFAULT_URL = "redis://127.0.0.1:6379"
DEFAULT_KEY = "%(spider)s:dupefilter"
DEFAULT_STANDALONE_KEY = "dupefilter:%(timestamp)s"
FINGERPRINTS = ("scrapy", "scrapy-redis")


def node_urls(settings):
    """The nodes to use, in order: POLLEN_URL then POLLEN_URLS when either is
    set, else REDIS_URL, else the default."""
    urls = []
    if settings.get("POLLEN_URL"):
        urls.append(settings.get("POLLEN_URL"))
    extra = settings.get("POLLEN_URLS") or []
    if isinstance(extra, str):
        extra = [u.strip() for u in extra.split(",") if u.strip()]
    urls.extend(u for u in extra if u not in urls)
    if urls:
        return urls
    return [settings.get("REDIS_URL") or DEFAULT_URL]


def scrapy_redis_fingerprint(request):
    """The key scrapy-redis (0.8 and later) stores for a request: the SHA1, in
    hex, of a JSON object with sorted keys holding the method, the canonical
    URL and the body in hex (scrapy_redis.dupefilter.RFPDupeFilter.request_fingerprint)."""
    from w3lib.url import canonicalize_url
    method = request.method if isinstance(request.method, str) else request.method.decode()
    document = {"method": method, "url": canonicalize_url(request.url), "body": (request.body or b"").hex()}
    return hashlib.sha1(json.dumps(document, sort_keys=True).encode()).hexdigest()


class PollenDupeFilter(BaseDupeFilter):
    """Scrapy's dupefilter interface over a pollen.client.SeenSet."""

    def __init__(self, seen_set, debug=False, fingerprinter=None, error_rate=0.001, capacity=10_000_000,
                 routed=False, stats=None, fingerprint="scrapy"):
        if fingerprint not in FINGERPRINTS:
            raise ValueError("POLLEN_FINGERPRINT must be one of %s, not %r" % (", ".join(FINGERPRINTS), fingerprint))
        self.seen_set = seen_set
        self.debug = debug
        self.fingerprinter = fingerprinter
        self.error_rate = error_rate
        self.capacity = capacity
        self.routed = routed
        self.stats = stats
        self.fingerprint = fingerprint
        self.logdupes = True
        self._filter_ready = False  # reserved since construction or the last clear()

    # -- constructors: Scrapy calls from_crawler, scrapy-redis's scheduler
    # from_spider (or from_settings for a class without from_spider) --------

    @classmethod
    def from_crawler(cls, crawler):
        spider = getattr(crawler, "spider", None)
        name = spider.name if spider is not None else "scrapy"
        key = crawler.settings.get("SCHEDULER_DUPEFILTER_KEY") or DEFAULT_KEY
        return cls._build(crawler.settings, key % {"spider": name}, crawler)

    @classmethod
    def from_spider(cls, spider):
        key = spider.settings.get("SCHEDULER_DUPEFILTER_KEY") or DEFAULT_KEY
        return cls._build(spider.settings, key % {"spider": spider.name}, getattr(spider, "crawler", None))

    @classmethod
    def from_settings(cls, settings):
        key = settings.get("DUPEFILTER_KEY") or DEFAULT_STANDALONE_KEY
        return cls._build(settings, key % {"timestamp": int(time.time())}, None)

    @classmethod
    def _build(cls, settings, key, crawler):
        urls = node_urls(settings)
        if settings.get("REDIS_URL") and settings.get("REDIS_URL") not in urls:
            logger.info("pollen: dupefilter %r at %s; REDIS_URL (%s) is not a Pollen node here",
                        key, ", ".join(urls), settings.get("REDIS_URL"))
        seen_set = SeenSet(urls, key,
                           wait_replicas=settings.getint("POLLEN_WAIT_REPLICAS", 0),
                           wait_timeout_ms=settings.getint("POLLEN_WAIT_TIMEOUT_MS", 1000),
                           home_retry_seconds=settings.getfloat("POLLEN_HOME_RETRY_SECONDS", 30.0))
        return cls(seen_set, debug=settings.getbool("DUPEFILTER_DEBUG"),
                   fingerprinter=getattr(crawler, "request_fingerprinter", None),
                   error_rate=settings.getfloat("POLLEN_ERROR_RATE", 0.001),
                   capacity=settings.getint("POLLEN_CAPACITY", 10_000_000),
                   routed=settings.getbool("POLLEN_ROUTED", False),
                   stats=getattr(crawler, "stats", None),
                   fingerprint=settings.get("POLLEN_FINGERPRINT") or "scrapy")

    # -- the dupefilter interface --------------------------------------------

    def open(self):
        self._ensure_filter()

    def close(self, reason):
        self._publish_counters()
        self.seen_set.close()

    def clear(self):
        """Deletes the filter at every node (scrapy-redis's scheduler calls
        this at close unless SCHEDULER_PERSIST is set); the next request
        creates it again."""
        self.seen_set.delete()
        self._filter_ready = False

    def request_fingerprint(self, request):
        if self.fingerprint == "scrapy-redis":
            return scrapy_redis_fingerprint(request)
        if self.fingerprinter is not None:
            return self.fingerprinter.fingerprint(request).hex()
        from scrapy.utils.request import fingerprint  # Scrapy >= 2.7
        return fingerprint(request).hex()

    def request_seen(self, request):
        self._ensure_filter()
        seen = self.seen_set.seen_add([self.request_fingerprint(request)])[0]
        self._publish_counters()  # now: scrapy-redis's scheduler never calls close()
        return seen

    def log(self, request, spider):
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request}, extra={"spider": spider})
        elif self.logdupes:
            logger.debug("Filtered duplicate request %(request)s - no more duplicates will be shown"
                         " (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request},
                         extra={"spider": spider})
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered", spider=spider)

    def _publish_counters(self):
        if self.stats is None:
            return
        self.stats.set_value("pollen/failovers", self.seen_set.failovers)
        self.stats.set_value("pollen/unvouched_keys", self.seen_set.unvouched)
        self.stats.set_value("pollen/short_waits", self.seen_set.short_waits)
        self.stats.set_value("pollen/rewaited_keys", self.seen_set.rewaited)

    def _ensure_filter(self):
        if not self._filter_ready:
            self.seen_set.reserve(self.error_rate, self.capacity, routed=self.routed)
            self._filter_ready = True
