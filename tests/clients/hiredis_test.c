/* End-to-end checks of a RESP server (pollend, or Redis + RedisBloom) through
 * hiredis, the C client (Debian's libhiredis-dev: 0.14 on Debian 12).
 *
 * Build: cc -std=c11 -Wall -Wextra hiredis_test.c -lhiredis -o hiredis_test
 * Usage: hiredis_test HOST PORT
 *
 * Unlike the high-level clients this looks at the reply types on the wire
 * (status vs bulk string vs integer vs array vs nil). Expected replies are
 * Redis 7.0's and RedisBloom 2.4's. One line per check, then
 * `N passed, M failed` alone on the last line; exit 1 if any check failed.
 */
#define _POSIX_C_SOURCE 200809L
#include <hiredis/hiredis.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *g_host;
static int g_port;
static char g_pfx[32];
static int g_passed, g_failed, g_check_failed;
static char g_why[512];

static const char *type_name(int t) {
  switch (t) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
#ifdef REDIS_REPLY_MAP
    case REDIS_REPLY_MAP: return "map";
    case REDIS_REPLY_SET: return "set";
    case REDIS_REPLY_DOUBLE: return "double";
    case REDIS_REPLY_BOOL: return "bool";
#endif
    default: return "other";
  }
}

/* Record the first failure of the running check; later ones add nothing. */
static void fail(const char *fmt, ...) {
  if (g_check_failed) return;
  g_check_failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_why, sizeof g_why, fmt, ap);
  va_end(ap);
}

#define EXPECT(cond, ...) \
  do {                    \
    if (!(cond)) {        \
      fail(__VA_ARGS__);  \
      goto out;           \
    }                     \
  } while (0)

static redisContext *connect_or_null(void) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout(g_host, g_port, tv);
  if (c == NULL || c->err) {
    fail("connect %s:%d: %s", g_host, g_port, c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return NULL;
  }
  struct timeval io = {10, 0};
  redisSetTimeout(c, io);
  return c;
}

static redisReply *cmd(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  if (r == NULL) fail("no reply to '%s': %s", fmt, c->errstr);
  return r;
}

static int is_int(const redisReply *r, long long v) {
  return r && r->type == REDIS_REPLY_INTEGER && r->integer == v;
}
static int is_status(const redisReply *r, const char *s) {
  return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}
static int is_error_with(const redisReply *r, const char *frag) {
  return r && r->type == REDIS_REPLY_ERROR && strstr(r->str, frag) != NULL;
}
static int is_int_array(const redisReply *r, const long long *v, size_t n) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!is_int(r->element[i], v[i])) return 0;
  return 1;
}
static const char *show(const redisReply *r) {
  static char buf[160];
  if (!r) return "(no reply)";
  switch (r->type) {
    case REDIS_REPLY_INTEGER: snprintf(buf, sizeof buf, "integer %lld", r->integer); break;
    case REDIS_REPLY_ARRAY: snprintf(buf, sizeof buf, "array of %zu", r->elements); break;
    case REDIS_REPLY_NIL: snprintf(buf, sizeof buf, "nil"); break;
    default: snprintf(buf, sizeof buf, "%s \"%.120s\"", type_name(r->type), r->str ? r->str : ""); break;
  }
  return buf;
}

#define FREE(r)            \
  do {                     \
    if (r) freeReplyObject(r); \
    r = NULL;              \
  } while (0)

/* ------------------------------------------------------------------ checks */

static void check_connect_ping(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  if (!c) return;
  r = cmd(c, "PING");
  EXPECT(is_status(r, "PONG"), "PING: %s, want status PONG", show(r));
  FREE(r);
  r = cmd(c, "ECHO %s", "hi");
  EXPECT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "hi") == 0, "ECHO: %s", show(r));
out:
  FREE(r);
  redisFree(c);
}

static void check_hello_2(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  if (!c) return;
  r = cmd(c, "HELLO 2");
  EXPECT(r && r->type == REDIS_REPLY_ARRAY && r->elements >= 14 && r->elements % 2 == 0,
         "HELLO 2: %s, want a flat array of field/value pairs", show(r));
  int proto_ok = 0;
  for (size_t i = 0; i + 1 < r->elements; i += 2)
    if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, "proto") == 0)
      proto_ok = is_int(r->element[i + 1], 2);
  EXPECT(proto_ok, "HELLO 2: proto is not integer 2");
out:
  FREE(r);
  redisFree(c);
}

static void check_bf_basic_replies(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  char k[64];
  if (!c) return;
  snprintf(k, sizeof k, "%sbasic", g_pfx);
  r = cmd(c, "BF.RESERVE %s 0.001 1000", k);
  EXPECT(is_status(r, "OK"), "BF.RESERVE: %s, want status OK", show(r));
  FREE(r);
  r = cmd(c, "BF.ADD %s %s", k, "alpha");
  EXPECT(is_int(r, 1), "BF.ADD new: %s, want integer 1", show(r));
  FREE(r);
  r = cmd(c, "BF.ADD %s %s", k, "alpha");
  EXPECT(is_int(r, 0), "BF.ADD again: %s, want integer 0", show(r));
  FREE(r);
  r = cmd(c, "BF.EXISTS %s %s", k, "alpha");
  EXPECT(is_int(r, 1), "BF.EXISTS: %s, want integer 1", show(r));
  FREE(r);
  r = cmd(c, "BF.EXISTS %s %s", k, "beta");
  EXPECT(is_int(r, 0), "BF.EXISTS other: %s, want integer 0", show(r));
  FREE(r);
  {
    const long long want[] = {1, 1, 0};
    r = cmd(c, "BF.MADD %s b c b", k);
    EXPECT(is_int_array(r, want, 3), "BF.MADD b c b: %s, want [1,1,0]", show(r));
    FREE(r);
  }
  {
    const long long want[] = {1, 0, 1};
    r = cmd(c, "BF.MEXISTS %s b zz alpha", k);
    EXPECT(is_int_array(r, want, 3), "BF.MEXISTS: %s, want [1,0,1]", show(r));
    FREE(r);
  }
  /* items are binary safe: an embedded NUL and spaces */
  r = cmd(c, "BF.ADD %s %b", k, "a b\0c", (size_t)5);
  EXPECT(is_int(r, 1), "BF.ADD of a binary item: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.EXISTS %s %b", k, "a b\0c", (size_t)5);
  EXPECT(is_int(r, 1), "BF.EXISTS of the binary item: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.EXISTS %s %b", k, "a b", (size_t)3);
  EXPECT(is_int(r, 0), "BF.EXISTS of its prefix before the NUL: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.RESERVE %s 0.01 10", k);
  EXPECT(is_error_with(r, "item exists"), "BF.RESERVE twice: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.INFO %snope", g_pfx);
  EXPECT(is_error_with(r, "not found"), "BF.INFO of a missing filter: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.INFO %s", k);
  EXPECT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 10, "BF.INFO: %s, want an array of 10", show(r));
  /* RedisBloom answers the field names as simple strings (+Capacity) */
  EXPECT(is_status(r->element[0], "Capacity") && is_int(r->element[1], 1000),
         "BF.INFO starts status Capacity, integer 1000: %s", show(r->element[0]));
  EXPECT(is_status(r->element[6], "Number of items inserted") && is_int(r->element[7], 4),
         "BF.INFO Number of items inserted = 4 (got %s)", show(r->element[7]));
  FREE(r);
  r = cmd(c, "BF.CARD %s", k);
  EXPECT(is_int(r, 4), "BF.CARD: %s, want integer 4", show(r));
out:
  FREE(r);
  redisFree(c);
}

static void check_pipeline_100(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  char k[64];
  if (!c) return;
  snprintf(k, sizeof k, "%spipe", g_pfx);
  r = cmd(c, "BF.RESERVE %s 0.001 10000", k);
  EXPECT(is_status(r, "OK"), "BF.RESERVE: %s", show(r));
  FREE(r);
  for (int i = 0; i < 100; i++) redisAppendCommand(c, "BF.ADD %s item-%d", k, i);
  long long added = 0;
  for (int i = 0; i < 100; i++) {
    void *v = NULL;
    EXPECT(redisGetReply(c, &v) == REDIS_OK, "reply %d of 100: %s", i, c->errstr);
    r = v;
    EXPECT(r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1), "reply %d: %s", i, show(r));
    added += r->integer;
    FREE(r);
  }
  EXPECT(added >= 99, "new items answer 1: %lld of 100", added);
  for (int i = 0; i < 100; i++) redisAppendCommand(c, "BF.EXISTS %s item-%d", k, i);
  redisAppendCommand(c, "BF.CARD %s", k);
  for (int i = 0; i < 101; i++) {
    void *v = NULL;
    EXPECT(redisGetReply(c, &v) == REDIS_OK, "reply %d of 101: %s", i, c->errstr);
    r = v;
    if (i < 100)
      EXPECT(is_int(r, 1), "BF.EXISTS item-%d: %s", i, show(r));
    else /* exact in RedisBloom; pollend estimates from the set bits: allow 5% */
      EXPECT(r->type == REDIS_REPLY_INTEGER && llabs(r->integer - added) <= 5, "BF.CARD: %s, want %lld +-5",
             show(r), added);
    FREE(r);
  }
out:
  FREE(r);
  redisFree(c);
}

static void check_multi_exec_structure(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  char k[64];
  if (!c) return;
  snprintf(k, sizeof k, "%smulti", g_pfx);
  r = cmd(c, "MULTI");
  EXPECT(is_status(r, "OK"), "MULTI: %s, want status OK", show(r));
  FREE(r);
  r = cmd(c, "BF.RESERVE %s 0.001 1000", k);
  EXPECT(is_status(r, "QUEUED"), "BF.RESERVE in MULTI: %s, want status QUEUED", show(r));
  FREE(r);
  r = cmd(c, "BF.ADD %s a", k);
  EXPECT(is_status(r, "QUEUED"), "BF.ADD in MULTI: %s, want status QUEUED", show(r));
  FREE(r);
  r = cmd(c, "BF.MADD %s a b", k);
  EXPECT(is_status(r, "QUEUED"), "BF.MADD in MULTI: %s", show(r));
  FREE(r);
  r = cmd(c, "BF.RESERVE %s 0.01 10", k);
  EXPECT(is_status(r, "QUEUED"), "second BF.RESERVE in MULTI: %s", show(r));
  FREE(r);
  r = cmd(c, "EXEC");
  EXPECT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4, "EXEC: %s, want an array of 4", show(r));
  EXPECT(is_status(r->element[0], "OK"), "EXEC[0]: %s, want status OK", show(r->element[0]));
  EXPECT(is_int(r->element[1], 1), "EXEC[1]: %s, want integer 1", show(r->element[1]));
  {
    const long long want[] = {0, 1};
    EXPECT(is_int_array(r->element[2], want, 2), "EXEC[2]: %s, want [0,1]", show(r->element[2]));
  }
  EXPECT(is_error_with(r->element[3], "item exists"), "EXEC[3]: %s, want error item exists",
         show(r->element[3]));
  FREE(r);
  /* the same, pipelined in one write */
  redisAppendCommand(c, "MULTI");
  redisAppendCommand(c, "BF.EXISTS %s b", k);
  redisAppendCommand(c, "BF.CARD %s", k);
  redisAppendCommand(c, "EXEC");
  const char *want_status[] = {"OK", "QUEUED", "QUEUED"};
  for (int i = 0; i < 3; i++) {
    void *v = NULL;
    EXPECT(redisGetReply(c, &v) == REDIS_OK, "pipelined reply %d: %s", i, c->errstr);
    r = v;
    EXPECT(is_status(r, want_status[i]), "pipelined reply %d: %s, want %s", i, show(r), want_status[i]);
    FREE(r);
  }
  {
    void *v = NULL;
    EXPECT(redisGetReply(c, &v) == REDIS_OK, "pipelined EXEC: %s", c->errstr);
    r = v;
    const long long want[] = {1, 2};
    EXPECT(is_int_array(r, want, 2), "pipelined EXEC: %s, want [1,2]", show(r));
  }
out:
  FREE(r);
  redisFree(c);
}

static void check_watch_nil_and_execabort(void) {
  redisContext *c = connect_or_null();
  redisContext *other = NULL;
  redisReply *r = NULL;
  char k[64];
  if (!c) return;
  other = connect_or_null();
  if (!other) goto out;
  snprintf(k, sizeof k, "%swatch", g_pfx);
  r = cmd(c, "BF.RESERVE %s 0.001 1000", k);
  FREE(r);
  r = cmd(c, "WATCH %s", k);
  EXPECT(is_status(r, "OK"), "WATCH: %s, want status OK", show(r));
  FREE(r);
  r = cmd(other, "BF.ADD %s concurrent", k);
  EXPECT(is_int(r, 1), "BF.ADD from the other connection: %s", show(r));
  FREE(r);
  r = cmd(c, "MULTI");
  FREE(r);
  r = cmd(c, "BF.ADD %s from-tx", k);
  FREE(r);
  r = cmd(c, "EXEC");
  EXPECT(r && r->type == REDIS_REPLY_NIL, "EXEC after a WATCHed change: %s, want nil (*-1)", show(r));
  FREE(r);
  r = cmd(c, "BF.EXISTS %s from-tx", k);
  EXPECT(is_int(r, 0), "the aborted BF.ADD applied: %s", show(r));
  FREE(r);
  r = cmd(c, "MULTI");
  FREE(r);
  r = cmd(c, "NO.SUCH.COMMAND x");
  EXPECT(is_error_with(r, "unknown command"), "unknown command in MULTI: %s", show(r));
  FREE(r);
  r = cmd(c, "EXEC");
  EXPECT(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "EXECABORT", 9) == 0,
         "EXEC after a queueing error: %s, want EXECABORT", show(r));
  FREE(r);
  r = cmd(c, "EXEC");
  EXPECT(is_error_with(r, "EXEC without MULTI"), "EXEC without MULTI: %s", show(r));
  FREE(r);
  r = cmd(c, "MULTI");
  FREE(r);
  r = cmd(c, "DISCARD");
  EXPECT(is_status(r, "OK"), "DISCARD: %s, want status OK", show(r));
out:
  FREE(r);
  if (other) redisFree(other);
  redisFree(c);
}

static void check_keyspace_reply_types(void) {
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  char k[64];
  if (!c) return;
  snprintf(k, sizeof k, "%sks", g_pfx);
  r = cmd(c, "BF.RESERVE %s 0.01 100", k);
  FREE(r);
  r = cmd(c, "TYPE %s", k);
  EXPECT(is_status(r, "MBbloom--"), "TYPE: %s, want status MBbloom--", show(r));
  FREE(r);
  r = cmd(c, "TYPE %snone", g_pfx);
  EXPECT(is_status(r, "none"), "TYPE of a missing key: %s, want status none", show(r));
  FREE(r);
  r = cmd(c, "EXISTS %s %snone", k, g_pfx);
  EXPECT(is_int(r, 1), "EXISTS: %s, want integer 1", show(r));
  FREE(r);
  r = cmd(c, "DBSIZE");
  EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1, "DBSIZE: %s", show(r));
  FREE(r);
  /* SCAN: [cursor as a bulk string, array of names]; clients such as ioredis
     compare the cursor with the string "0" */
  long long cursor = 0;
  int found = 0, rounds = 0;
  do {
    r = cmd(c, "SCAN %lld MATCH %s* COUNT 100", cursor, g_pfx);
    EXPECT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN: %s, want an array of 2", show(r));
    EXPECT(r->element[0]->type == REDIS_REPLY_STRING, "SCAN cursor: %s, want a bulk string",
           show(r->element[0]));
    EXPECT(r->element[1]->type == REDIS_REPLY_ARRAY, "SCAN keys: %s, want an array", show(r->element[1]));
    for (size_t i = 0; i < r->element[1]->elements; i++)
      if (strcmp(r->element[1]->element[i]->str, k) == 0) found++;
    cursor = strtoll(r->element[0]->str, NULL, 10);
    FREE(r);
  } while (cursor != 0 && ++rounds < 100000);
  EXPECT(found == 1, "SCAN MATCH found the filter %d times, want 1", found);
  r = cmd(c, "KEYS %sk*", g_pfx);
  EXPECT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strcmp(r->element[0]->str, k) == 0,
         "KEYS: %s, want [%s]", show(r), k);
out:
  FREE(r);
  redisFree(c);
}

/* Returns 1 when run, 0 when skipped. */
static int check_resp3_hello_map(void) {
#ifdef REDIS_REPLY_MAP
  redisContext *c = connect_or_null();
  redisReply *r = NULL;
  char k[64];
  if (!c) return 1;
  snprintf(k, sizeof k, "%sresp3", g_pfx);
  r = cmd(c, "HELLO 3");
  EXPECT(r && r->type == REDIS_REPLY_MAP, "HELLO 3: %s, want a map", show(r));
  FREE(r);
  r = cmd(c, "BF.RESERVE %s 0.01 100", k);
  FREE(r);
  r = cmd(c, "BF.INFO %s", k);
  /* RedisBloom >= 2.6 answers a map; RedisBloom 2.4 keeps its flat array under RESP3.
     hiredis gives a map as `elements` = keys and values, alternating. */
  EXPECT(r && (r->type == REDIS_REPLY_MAP || r->type == REDIS_REPLY_ARRAY) && r->elements == 10,
         "BF.INFO under RESP3: %s, want a map (or RedisBloom 2.4's flat array) of 5 pairs", show(r));
  EXPECT(r->element[0]->str && strcmp(r->element[0]->str, "Capacity") == 0 && is_int(r->element[1], 100),
         "BF.INFO under RESP3: first pair is Capacity 100 (%s)", show(r->element[1]));
  FREE(r);
  r = cmd(c, "CONFIG GET save");
  EXPECT(r && r->type == REDIS_REPLY_MAP && r->elements == 2, "CONFIG GET save under RESP3: %s, want a map",
         show(r));
  FREE(r);
  r = cmd(c, "CLIENT GETNAME");
  EXPECT(r && r->type == REDIS_REPLY_NIL, "CLIENT GETNAME under RESP3: %s, want null", show(r));
out:
  FREE(r);
  redisFree(c);
  return 1;
#else
  return 0;
#endif
}

/* ------------------------------------------------------------------ runner */

static void run(const char *name, void (*fn)(void)) {
  g_check_failed = 0;
  g_why[0] = 0;
  fn();
  if (g_check_failed) {
    g_failed++;
    printf("FAIL %s: %s\n", name, g_why);
  } else {
    g_passed++;
    printf("ok   %s\n", name);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST PORT\n", argv[0]);
    return 2;
  }
  g_host = argv[1];
  g_port = atoi(argv[2]);
  struct timeval now;
  gettimeofday(&now, NULL);
  srand((unsigned)(now.tv_usec ^ now.tv_sec ^ getpid()));
  snprintf(g_pfx, sizeof g_pfx, "hir%08x:", (unsigned)rand());
#ifdef HIREDIS_MAJOR
  printf("hiredis %d.%d.%d against %s:%d (key prefix %s)\n", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, g_host,
         g_port, g_pfx);
#endif

  run("connect, PING, ECHO", check_connect_ping);
  run("HELLO 2 is a flat array with proto 2", check_hello_2);
  run("BF.* reply types (status, integer, array, error)", check_bf_basic_replies);
  run("pipeline of 100 redisAppendCommand BF.ADD, then 101 more", check_pipeline_100);
  run("MULTI/EXEC reply structure (QUEUED, nested array, error element)", check_multi_exec_structure);
  run("WATCH conflict gives a nil EXEC; EXECABORT; DISCARD", check_watch_nil_and_execabort);
  run("keyspace reply types (TYPE status, SCAN [bulk cursor, array], KEYS)", check_keyspace_reply_types);

  g_check_failed = 0;
  if (check_resp3_hello_map()) {
    if (g_check_failed) {
      g_failed++;
      printf("FAIL HELLO 3 then map replies: %s\n", g_why);
    } else {
      g_passed++;
      printf("ok   HELLO 3 then map replies\n");
    }
  } else {
    printf("skip HELLO 3 then map replies: this hiredis (%d.%d) has no RESP3 reply types "
           "(REDIS_REPLY_MAP came in hiredis 1.0)\n",
#ifdef HIREDIS_MAJOR
           HIREDIS_MAJOR, HIREDIS_MINOR
#else
           0, 0
#endif
    );
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
