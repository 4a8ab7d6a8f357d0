"""A Scrapy scheduler with its request queue in Redis, calling its dupefilter
exactly as scrapy-redis's does (scrapy_redis/scheduler.py, rmax/scrapy-redis
master of 2026-05-19; its source is not in Debian, so the tests use this):

- from_settings: when the dupefilter class has no `from_spider`, the
  dupefilter is built with `from_settings(settings)` there;
- open(spider): otherwise it is built with `from_spider(spider)`; open() of
  the dupefilter is never called;
- enqueue_request: `request_seen(request)` unless dont_filter, and
  `log(request, spider)` for a duplicate;
- close(reason): `flush()` unless SCHEDULER_PERSIST, which calls
  `clear()` on the dupefilter and empties the queue; the dupefilter's
  close() is never called.

REDIS_URL is the Redis that holds the queue (a plain redis-server), a FIFO
list of JSON requests under SCHEDULER_QUEUE_KEY ("%(spider)s:requests"), so
several crawler processes share one queue.
"""
import json

import redis
from scrapy import Request
from scrapy.utils.misc import load_object


class Scheduler:
    def __init__(self, server, persist, queue_key, dupefilter_cls, dupefilter=None, stats=None):
        self.server = server
        self.persist = persist
        self.queue_key = queue_key
        self.dupefilter_cls = dupefilter_cls
        self.df = dupefilter
        self.stats = stats
        self.spider = None
        self.key = None

    @classmethod
    def from_settings(cls, settings):
        dupefilter_cls = load_object(settings.get("DUPEFILTER_CLASS"))
        dupefilter = None
        if not hasattr(dupefilter_cls, "from_spider"):
            dupefilter = dupefilter_cls.from_settings(settings)
        server = redis.Redis.from_url(settings.get("REDIS_URL"))
        server.ping()
        return cls(server, settings.getbool("SCHEDULER_PERSIST"),
                   settings.get("SCHEDULER_QUEUE_KEY") or "%(spider)s:requests", dupefilter_cls, dupefilter)

    @classmethod
    def from_crawler(cls, crawler):
        scheduler = cls.from_settings(crawler.settings)
        scheduler.stats = crawler.stats
        return scheduler

    def open(self, spider):
        self.spider = spider
        self.key = self.queue_key % {"spider": spider.name}
        if not self.df:
            self.df = self.dupefilter_cls.from_spider(spider)

    def close(self, reason):
        if not self.persist:
            self.flush()

    def flush(self):
        self.df.clear()
        self.server.delete(self.key)

    def enqueue_request(self, request):
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        if self.stats:
            self.stats.inc_value("scheduler/enqueued/redis")
        callback = request.callback.__name__ if request.callback else None
        self.server.rpush(self.key, json.dumps({"url": request.url, "callback": callback}))
        return True

    def next_request(self):
        raw = self.server.lpop(self.key)
        if raw is None:
            return None
        item = json.loads(raw)
        callback = getattr(self.spider, item["callback"]) if item["callback"] else None
        if self.stats:
            self.stats.inc_value("scheduler/dequeued/redis")
        return Request(item["url"], callback=callback, dont_filter=True)

    def has_pending_requests(self):
        return self.server.llen(self.key) > 0

    def __len__(self):
        return self.server.llen(self.key)
