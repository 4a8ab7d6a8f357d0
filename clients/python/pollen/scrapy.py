"""A Scrapy dupefilter on Pollen: scrapy-redis's RFPDupeFilter, with a Bloom
filter replicated across nodes in place of one Redis SET.

Switching from scrapy-redis is one line in settings.py:

    DUPEFILTER_CLASS = "pollen.scrapy.PollenDupeFilter"

Settings (scrapy-redis's names where they mean the same):
    REDIS_URL                  the local node, "redis://host:port" (default
                               "redis://127.0.0.1:6379")
    POLLEN_URLS                the nodes to fail over to, in order (a list, or
                               a comma-separated string); REDIS_URL, if set,
                               goes first
    SCHEDULER_DUPEFILTER_KEY   the filter's name, a template over the spider's
                               name (default "%(spider)s:dupefilter")
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

A false positive of the filter (POLLEN_ERROR_RATE) skips a request that was
never fetched; a node failing mid-request answers its keys "not seen"
(pollen.client.SeenSet), so a request may then be fetched twice, never lost.
"""
import logging

from scrapy.dupefilters import BaseDupeFilter

from pollen.client import SeenSet

logger = logging.getLogger(__name__)

DEFAULT_URL = "redis://127.0.0.1:6379"
DEFAULT_KEY = "%(spider)s:dupefilter"


def _node_urls(settings):
    urls = []
    if settings.get("REDIS_URL"):
        urls.append(settings.get("REDIS_URL"))
    extra = settings.get("POLLEN_URLS") or []
    if isinstance(extra, str):
        extra = [u.strip() for u in extra.split(",") if u.strip()]
    urls.extend(u for u in extra if u not in urls)
    return urls or [DEFAULT_URL]


class PollenDupeFilter(BaseDupeFilter):
    """Scrapy's dupefilter interface over a pollen.client.SeenSet."""

    def __init__(self, seen_set, debug=False, fingerprinter=None, error_rate=0.001, capacity=10_000_000,
                 routed=False, stats=None):
        self.seen_set = seen_set
        self.debug = debug
        self.fingerprinter = fingerprinter
        self.error_rate = error_rate
        self.capacity = capacity
        self.routed = routed
        self.stats = stats
        self.logdupes = True

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        spider = getattr(crawler, "spider", None)
        name = spider.name if spider is not None else "scrapy"
        key = settings.get("SCHEDULER_DUPEFILTER_KEY", DEFAULT_KEY) % {"spider": name}
        seen_set = SeenSet(_node_urls(settings), key,
                           wait_replicas=settings.getint("POLLEN_WAIT_REPLICAS", 0),
                           wait_timeout_ms=settings.getint("POLLEN_WAIT_TIMEOUT_MS", 1000),
                           home_retry_seconds=settings.getfloat("POLLEN_HOME_RETRY_SECONDS", 30.0))
        return cls(seen_set, debug=settings.getbool("DUPEFILTER_DEBUG"),
                   fingerprinter=getattr(crawler, "request_fingerprinter", None),
                   error_rate=settings.getfloat("POLLEN_ERROR_RATE", 0.001),
                   capacity=settings.getint("POLLEN_CAPACITY", 10_000_000),
                   routed=settings.getbool("POLLEN_ROUTED", False),
                   stats=crawler.stats)

    def open(self):
        self.seen_set.reserve(self.error_rate, self.capacity, routed=self.routed)

    def close(self, reason):
        if self.stats is not None:
            self.stats.set_value("pollen/failovers", self.seen_set.failovers)
            self.stats.set_value("pollen/unvouched_keys", self.seen_set.unvouched)
            self.stats.set_value("pollen/short_waits", self.seen_set.short_waits)
        self.seen_set.close()

    def request_fingerprint(self, request):
        if self.fingerprinter is not None:
            return self.fingerprinter.fingerprint(request).hex()
        from scrapy.utils.request import fingerprint  # Scrapy >= 2.7
        return fingerprint(request).hex()

    def request_seen(self, request):
        return self.seen_set.seen_add([self.request_fingerprint(request)])[0]

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
