#!/usr/bin/env bash
# End-to-end checks of a RESP server (pollend, or Redis + RedisBloom) through
# Redis' own tools: redis-cli (plain, -3, --scan, --bigkeys, --pipe) and
# redis-benchmark (Debian's redis-tools), plus a few raw RESP2/RESP3 exchanges
# over bash's /dev/tcp to pin the wire types that the tools hide.
#
# Usage: redis_cli_test.sh HOST PORT
# Expected replies are Redis 7.0's and RedisBloom 2.4's. One line per check,
# then `N passed, M failed` alone on the last line; exit 1 if any check failed.
set -u

if [ $# -ne 2 ]; then
  echo "usage: redis_cli_test.sh HOST PORT" >&2
  exit 2
fi
HOST=$1
PORT=$2
PFX="cli$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n'):"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

passed=0
failed=0
CHECK=""
CHECK_FAILED=0
WHY=""

begin() { CHECK=$1; CHECK_FAILED=0; WHY=""; }
fail() { if [ "$CHECK_FAILED" = 0 ]; then CHECK_FAILED=1; WHY=$1; fi; }
end() {
  if [ "$CHECK_FAILED" = 0 ]; then
    passed=$((passed + 1)); echo "ok   $CHECK"
  else
    failed=$((failed + 1)); echo "FAIL $CHECK: $WHY"
  fi
}
# expect_eq GOT WANT WHAT
expect_eq() { [ "$1" = "$2" ] || fail "$3: got '$(printf %s "$1" | head -c 300 | tr '\n' '|')', want '$(printf %s "$2" | tr '\n' '|')'"; }
# expect_match TEXT REGEX WHAT   (grep -E on the text)
expect_match() { printf '%s\n' "$1" | grep -Eq -- "$2" || fail "$3: '$(printf %s "$1" | head -c 300 | tr '\n' '|')' lacks /$2/"; }

cli() { timeout 30 redis-cli -h "$HOST" -p "$PORT" "$@"; }

# raw REQUESTS: send the (printf-escaped) requests, which must end in QUIT,
# and print everything the server sends back until it closes.
raw() {
  timeout 10 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1; printf "$2" >&3; cat <&3' "$HOST" "$PORT" "$1" 2>/dev/null
}

echo "$(redis-cli --version), $(redis-benchmark --version 2>/dev/null | head -1) against $HOST:$PORT (key prefix $PFX)"

# ----------------------------------------------------------------- plain
begin "redis-cli plain: BF.RESERVE, BF.ADD, BF.EXISTS, BF.MADD, errors"
K="${PFX}plain"
expect_eq "$(cli BF.RESERVE "$K" 0.001 1000)" "OK" "BF.RESERVE"
expect_eq "$(cli BF.ADD "$K" https://example.com/)" "1" "BF.ADD new"
expect_eq "$(cli BF.ADD "$K" https://example.com/)" "0" "BF.ADD again"
expect_eq "$(cli --no-raw BF.ADD "$K" https://example.com/)" "(integer) 0" "BF.ADD again (--no-raw)"
expect_eq "$(cli BF.EXISTS "$K" https://example.com/)" "1" "BF.EXISTS added"
expect_eq "$(cli BF.EXISTS "$K" https://example.org/)" "0" "BF.EXISTS other"
expect_eq "$(cli BF.MADD "$K" a b a)" "$(printf '1\n1\n0')" "BF.MADD a b a"
expect_eq "$(cli --no-raw BF.MEXISTS "$K" a zz)" "$(printf '1) (integer) 1\n2) (integer) 0')" "BF.MEXISTS (--no-raw)"
expect_eq "$(cli BF.CARD "$K")" "3" "BF.CARD"
expect_eq "$(cli BF.INFO "${PFX}missing")" "ERR not found" "BF.INFO of a missing filter"
expect_eq "$(cli BF.RESERVE "$K" 0.01 10)" "ERR item exists" "BF.RESERVE twice"
end

# ----------------------------------------------------------------- RESP3 via -3
begin "redis-cli -3: HELLO 3 negotiated, maps for HELLO, BF.INFO, CONFIG GET"
K="${PFX}resp3"
cli BF.RESERVE "$K" 0.01 1000 >/dev/null
cli BF.ADD "$K" x >/dev/null
out=$(cli -3 --no-raw HELLO 3 2>"$TMP/err")
err=$(cat "$TMP/err")
[ -z "$err" ] || fail "redis-cli -3 complained: $err"
expect_match "$out" '^[0-9]+# "proto" => \(integer\) 3$' "HELLO 3 is a map with proto 3"
expect_match "$out" '^[0-9]+# "server" => "redis"$' "HELLO 3 has server"
expect_match "$out" '^[0-9]+# "modules" =>' "HELLO 3 has modules"
out=$(cli -3 --no-raw BF.INFO "$K" 2>&1)
# RedisBloom >= 2.6 (and node-redis v5's typing) answer a RESP3 map:  1# "Capacity" => (integer) 1000
# RedisBloom 2.4 keeps the flat array under RESP3:                     1) Capacity / 2) (integer) 1000
if printf '%s\n' "$out" | grep -q '=>'; then
  expect_match "$out" '^1# "Capacity" => \(integer\) 1000$' "BF.INFO map: Capacity"
  expect_match "$out" '^[0-9]+# "?Number of items inserted"? => \(integer\) 1$' "BF.INFO map: items"
  expect_match "$out" '^[0-9]+# "Number of filters" => \(integer\) [0-9]+$' "BF.INFO map: filters"
else
  expect_match "$out" '^ ?1\) Capacity$' "BF.INFO (flat, RedisBloom 2.4 style): Capacity"
  expect_match "$out" '^ ?2\) \(integer\) 1000$' "BF.INFO (flat): capacity value"
  expect_match "$out" '^ ?8\) \(integer\) 1$' "BF.INFO (flat): items value"
fi
expect_eq "$(cli -3 --no-raw CONFIG GET save 2>&1)" '1# "save" => ""' "CONFIG GET save is a map"
expect_eq "$(cli -3 --no-raw BF.ADD "$K" y 2>&1)" "(integer) 1" "BF.ADD under RESP3"
expect_eq "$(cli -3 --no-raw CLIENT GETNAME 2>&1)" "(nil)" "CLIENT GETNAME under RESP3"
end

# Pollen's resp3-replies = redis-8 (a server without the setting, such as the
# Redis 7 anchor, refuses the CONFIG SET and the check is not run).
if [ "$(cli CONFIG SET resp3-replies redis-8 2>&1)" = "OK" ]; then
  begin "redis-cli -3 with resp3-replies redis-8: booleans and a BF.INFO map, as Redis 8"
  K="${PFX}redis8"
  expect_eq "$(cli -3 --no-raw BF.ADD "$K" x 2>&1)" "(true)" "BF.ADD of a new key"
  expect_eq "$(cli -3 --no-raw BF.ADD "$K" x 2>&1)" "(false)" "BF.ADD of a present key"
  expect_eq "$(cli -3 --no-raw BF.MEXISTS "$K" x never-added 2>&1)" "$(printf '1) (true)\n2) (false)')" "BF.MEXISTS"
  out=$(cli -3 --no-raw BF.INFO "$K" 2>&1)
  expect_match "$out" '^1# "?Capacity"? => \(integer\) [0-9]+$' "BF.INFO map: Capacity"
  expect_match "$out" '^[0-9]+# "?Number of items inserted"? => \(integer\) 1$' "BF.INFO map: items"
  expect_eq "$(cli --no-raw BF.ADD "$K" x 2>&1)" "(integer) 0" "BF.ADD under RESP2 keeps its integer"
  expect_eq "$(cli CONFIG SET resp3-replies redisbloom-2.4 2>&1)" "OK" "back to redisbloom-2.4"
  expect_eq "$(cli -3 --no-raw BF.ADD "$K" x 2>&1)" "(integer) 0" "BF.ADD under RESP3, redisbloom-2.4"
  end
fi

begin "raw RESP3 wire: %map for HELLO 3 and CONFIG GET, _ for nulls"
K="${PFX}wire"
cli BF.RESERVE "$K" 0.01 100 NONSCALING >/dev/null
out=$(raw 'HELLO 3\r\nCLIENT GETNAME\r\nCONFIG GET appendonly\r\nBF.INFO '"$K"'\r\nQUIT\r\n' | tr -d '\r')
expect_match "$(printf '%s\n' "$out" | head -1)" '^%[0-9]+$' "HELLO 3 reply starts with a %map header"
expect_match "$out" '^_$' "a RESP3 null (_) for CLIENT GETNAME"
printf '%s\n' "$out" | grep -A4 -x '%1' | grep -qx 'appendonly' || fail "CONFIG GET appendonly is %1 map: $(printf %s "$out" | tr '\n' '|' | head -c 400)"
# Expansion rate of a NONSCALING filter is a null: _ under RESP3
printf '%s\n' "$out" | grep -A1 'Expansion rate' | tail -1 | grep -qx '_' \
  || fail "BF.INFO NONSCALING Expansion rate is _: $(printf %s "$out" | tr '\n' '|' | tail -c 200)"
out=$(raw 'CLIENT GETNAME\r\nQUIT\r\n' | tr -d '\r' | head -1)
expect_eq "$out" '$-1' "RESP2 (no HELLO) keeps the \$-1 null"
end

# ----------------------------------------------------------------- --scan
begin "redis-cli --scan --pattern"
for s in a1 a2 a3 b1; do cli BF.RESERVE "${PFX}scan:$s" 0.01 100 >/dev/null; done
out=$(cli --scan --pattern "${PFX}scan:a*" 2>&1 | sort)
expect_eq "$out" "$(printf '%s\n' "${PFX}scan:a1" "${PFX}scan:a2" "${PFX}scan:a3")" "--scan --pattern scan:a*"
out=$(cli --scan --pattern "${PFX}scan:*" 2>&1 | sort | tr '\n' ' ')
expect_eq "$out" "${PFX}scan:a1 ${PFX}scan:a2 ${PFX}scan:a3 ${PFX}scan:b1 " "--scan --pattern scan:* finds all four"
out=$(cli --scan 2>&1 | grep -c "^${PFX}scan:")
expect_eq "$out" "4" "--scan (every key) lists the four once each"
end

# ----------------------------------------------------------------- --bigkeys
begin "redis-cli --bigkeys reports the bloom type"
cli --bigkeys >"$TMP/bigkeys" 2>&1
rc=$?
out=$(cat "$TMP/bigkeys")
expect_eq "$rc" "0" "--bigkeys exit code ($(tail -c 200 "$TMP/bigkeys" | tr '\n' '|'))"
expect_match "$out" '^Sampled [0-9]+ keys in the keyspace!$' "--bigkeys sampled the keyspace"
expect_match "$out" '^[0-9]+ MBbloom--s with ' "--bigkeys summary names MBbloom--"
n=$(printf '%s\n' "$out" | sed -n 's/^\([0-9][0-9]*\) MBbloom--s with .*/\1/p')
# this suite alone has made 7 filters by now
[ -n "$n" ] && [ "$n" -ge 7 ] || fail "--bigkeys counted ${n:-no} MBbloom-- keys, want >= 7"
end

# ----------------------------------------------------------------- --pipe
begin "redis-cli --pipe of 500 BF.ADD"
K="${PFX}pipe"
cli BF.RESERVE "$K" 0.001 10000 >/dev/null
for i in $(seq 1 500); do
  printf '*3\r\n$6\r\nBF.ADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n' "${#K}" "$K" "${#i}" "$i"
done >"$TMP/pipe.txt"
out=$(timeout 60 redis-cli -h "$HOST" -p "$PORT" --pipe <"$TMP/pipe.txt" 2>&1)
rc=$?
expect_eq "$rc" "0" "--pipe exit code"
expect_match "$out" '^errors: 0, replies: 500$' "--pipe summary"
expect_eq "$(cli BF.EXISTS "$K" 250)" "1" "an item sent through --pipe"
end

# ----------------------------------------------------------------- redis-benchmark
begin "redis-benchmark -t ping_inline,ping_mbulk -n 2000 -c 4 -P 4"
timeout 120 redis-benchmark -h "$HOST" -p "$PORT" -t ping_inline,ping_mbulk -n 2000 -c 4 -P 4 >"$TMP/bench1" 2>&1
rc=$?
out=$(tr '\r' '\n' <"$TMP/bench1")
expect_eq "$rc" "0" "redis-benchmark exit code ($(printf %s "$out" | grep -a -i err | head -2 | tr '\n' '|'))"
expect_eq "$(printf '%s\n' "$out" | grep -a -c '2000 requests completed in')" "2" "both tests report 2000 requests completed"
end

begin "redis-benchmark -n 2000 -c 4 -P 4 -r 100000 BF.ADD key __rand_int__"
K="${PFX}bench"
timeout 120 redis-benchmark -h "$HOST" -p "$PORT" -n 2000 -c 4 -P 4 -r 100000 BF.ADD "$K" __rand_int__ >"$TMP/bench2" 2>&1
rc=$?
out=$(tr '\r' '\n' <"$TMP/bench2")
expect_eq "$rc" "0" "redis-benchmark exit code ($(printf %s "$out" | grep -a -i err | head -2 | tr '\n' '|'))"
expect_match "$out" '^ *2000 requests completed in ' "reports 2000 requests completed"
card=$(cli BF.CARD "$K")
# ~2000 draws from 100000 values: about 20 repeats; the filter is auto-created
case "$card" in
  '' | *[!0-9]*) fail "BF.CARD after the benchmark: '$card'" ;;
  *) { [ "$card" -ge 1800 ] && [ "$card" -le 2100 ]; } || fail "BF.CARD after the benchmark: $card, want about 1980" ;;
esac
end

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
