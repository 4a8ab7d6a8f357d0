"""Runs one Scrapy crawl (a subprocess of test_scrapy_crawl.py: Twisted's
reactor starts once per process). argv: a JSON object with start_url,
settings (merged over the test defaults) and stats_out (where the crawl's
stats are written as JSON)."""
import json
import os
import sys

import scrapy
from scrapy.crawler import CrawlerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # the pollen package
sys.path.insert(0, HERE)  # redis_queue_scheduler

job = json.loads(sys.argv[1])


class SiteSpider(scrapy.Spider):
    name = "site"

    def start_requests(self):
        # Through the dupefilter (dont_filter=False): two crawlers starting
        # at the same page fetch it once between them.
        yield scrapy.Request(job["start_url"], dont_filter=False)

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


settings = {
    "DUPEFILTER_CLASS": "pollen.scrapy.PollenDupeFilter",
    "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 20,
}
settings.update(job["settings"])
process = CrawlerProcess(settings)
crawler = process.create_crawler(SiteSpider)
process.crawl(crawler)
process.start()
with open(job["stats_out"], "w") as f:
    json.dump({k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}, f)
