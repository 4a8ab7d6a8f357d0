// One crawler process of test_crawlee_crawl.py: a real CheerioCrawler with
// its own in-memory storage (nothing persisted, nothing shared with the other
// process but the Pollen cluster), its RequestQueue filtered through a
// SeenSet.
//
//   node crawl.mjs '{"start_url": ..., "urls": [...], "filter": ..., "stats_out": ...}'
//
// Prints "ready" once set up, then waits for a line on stdin before it starts
// (both processes start together); writes its stats as JSON to stats_out.
import fs from 'node:fs';
import http from 'node:http';
import readline from 'node:readline';

import { CheerioCrawler, Configuration, GotScrapingHttpClient, log, RequestQueue } from '@crawlee/cheerio';

import { SeenSet, seenSetStats, withSeenSet } from 'pollen-seen-set';

const job = JSON.parse(process.argv[2]);
log.setLevel(log.LEVELS.WARNING);

// Warm up on a page of our own: Crawlee loads its HTTP client (got-scraping)
// at the first request, which takes most of a second. Without this, the
// process that gets there first has found most of the site before the
// other fetches its start page.
{
  const server = http.createServer((req, res) => res.end('<html><body>warm</body></html>'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  await new GotScrapingHttpClient().sendRequest({ url: `http://127.0.0.1:${server.address().port}/`, method: 'GET', headers: {} });
  await new Promise((resolve) => server.close(resolve));
}

const seenSet = new SeenSet({ urls: job.urls, filter: job.filter });
const config = new Configuration({ persistStorage: false });
const requestQueue = withSeenSet(await RequestQueue.open(null, { config }), seenSet);

const fetched = [];
let started = 0;
let firstFetchMs = null;
const failed = [];
const crawler = new CheerioCrawler({
  requestQueue,
  maxConcurrency: job.max_concurrency ?? 10,
  maxRequestRetries: 0,
  requestHandlerTimeoutSecs: 30,
  async requestHandler({ request, enqueueLinks }) {
    if (!fetched.length) firstFetchMs = Date.now() - started;
    fetched.push(request.url);
    await enqueueLinks({ strategy: 'same-hostname' });
  },
  failedRequestHandler({ request }, error) {
    failed.push(`${request.url}: ${error.message}`);
  },
}, config);

process.stdout.write('ready\n');
if (!job.no_wait) {
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
}

started = Date.now();
const run = await crawler.run([job.start_url]);
const stats = {
  fetched,
  failed,
  seconds: (Date.now() - started) / 1000,
  first_fetch_ms: firstFetchMs,
  requests_finished: run.requestsFinished,
  requests_failed: run.requestsFailed,
  queue: seenSetStats(requestQueue),
  seen_keys: seenSet.seenKeys,
  new_keys: seenSet.newKeys,
  requests: seenSet.requests,
  failovers: seenSet.failovers,
  unvouched: seenSet.unvouched,
};
await seenSet.close();
fs.writeFileSync(job.stats_out, JSON.stringify(stats));
