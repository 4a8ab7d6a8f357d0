#!/usr/bin/env bash
# Runs the real-client suites of tests/clients against one server:
#   redis_py_test.py     redis-py (Debian's python3-redis)
#   node/                node-redis v4 and ioredis v5 (npm ci into a work dir)
#   hiredis_test.c       hiredis (Debian's libhiredis-dev), built here with cc
#   redis_cli_test.sh    redis-cli and redis-benchmark (Debian's redis-tools)
#
# Usage:
#   run.sh POLLEND_PATH          start pollend on free loopback ports, run, stop it
#   run.sh --server HOST:PORT    run against a server that is already running
#                                (e.g. redis-server + RedisBloom, to check the tests)
# Environment: CLIENTS_WORK  work directory (node_modules, the hiredis binary, logs);
#                            default: a fresh mktemp directory, removed afterwards.
# Prints each suite's result, then `N passed, M failed` summing them; exits 1 on
# any failure, 2 on a usage or setup error.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
  echo "usage: run.sh POLLEND_PATH | run.sh --server HOST:PORT" >&2
  exit 2
}

POLLEND=""
HOST=""
PORT=""
case "${1:-}" in
  --server)
    [ $# -eq 2 ] || usage
    HOST=${2%:*}
    PORT=${2##*:}
    [ -n "$HOST" ] && [ "$HOST" != "$2" ] && [[ "$PORT" =~ ^[0-9]+$ ]] || usage
    ;;
  --server=*)
    [ $# -eq 1 ] || usage
    v=${1#--server=}
    HOST=${v%:*}
    PORT=${v##*:}
    [ -n "$HOST" ] && [ "$HOST" != "$v" ] && [[ "$PORT" =~ ^[0-9]+$ ]] || usage
    ;;
  '' | -h | --help) usage ;;
  *)
    [ $# -eq 1 ] || usage
    POLLEND=$1
    [ -x "$POLLEND" ] || { echo "run.sh: $POLLEND is not an executable file" >&2; exit 2; }
    POLLEND=$(cd "$(dirname "$POLLEND")" && pwd)/$(basename "$POLLEND")
    ;;
esac

# ------------------------------------------------------------------ installs
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "run.sh: need root (or sudo) to run: $*" >&2; return 1
  fi
}
missing=()
dpkg -s python3-redis >/dev/null 2>&1 || missing+=(python3-redis)
dpkg -s libhiredis-dev >/dev/null 2>&1 || missing+=(libhiredis-dev)
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null || missing+=(redis-tools)
command -v cc >/dev/null || missing+=(gcc libc6-dev)
if ! command -v node >/dev/null; then
  missing+=(nodejs npm)
elif ! command -v npm >/dev/null; then
  missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "run.sh: installing ${missing[*]} (apt-get)"
  as_root apt-get update -qq >/dev/null &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "run.sh: apt-get install ${missing[*]} failed" >&2; exit 2; }
fi
# Debian's python3-redis lives in /usr/lib/python3/dist-packages: use Debian's
# interpreter, not whichever python3 comes first on PATH (pyenv, venvs).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# ------------------------------------------------------------------ work dir
if [ -n "${CLIENTS_WORK:-}" ]; then
  WORK=$(realpath -m -- "$CLIENTS_WORK")
  case "$WORK/" in
    "$HERE"/*) echo "run.sh: CLIENTS_WORK must be outside $HERE (node_modules stays out of the sources)" >&2; exit 2 ;;
  esac
  mkdir -p "$WORK" || exit 2
  REMOVE_WORK=0
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/pollen-clients.XXXXXX") || exit 2
  REMOVE_WORK=1
fi

PID=""
stop_pollend() {
  [ -n "$PID" ] || return 0
  if kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$PID" 2>/dev/null; then
      echo "run.sh: pollend did not stop within 10 s of SIGTERM; sending SIGKILL"
      kill -KILL "$PID" 2>/dev/null
    fi
  fi
  wait "$PID" 2>/dev/null
  PID=""
}
cleanup() {
  stop_pollend
  [ "$REMOVE_WORK" = 1 ] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# node: a copy of tests/clients/node with its own node_modules (never in the source tree)
NODE_DIR=$WORK/node
mkdir -p "$NODE_DIR"
cp "$HERE/node/package.json" "$HERE/node/package-lock.json" "$HERE/node/node_clients_test.js" "$NODE_DIR/"
NODE_READY=1
if [ ! -d "$NODE_DIR/node_modules" ] || ! cmp -s "$NODE_DIR/package-lock.json" "$NODE_DIR/.installed-lock"; then
  echo "run.sh: npm ci in $NODE_DIR"
  if (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$WORK/npm-ci.log" 2>&1); then
    cp "$NODE_DIR/package-lock.json" "$NODE_DIR/.installed-lock"
  else
    NODE_READY=0
    echo "run.sh: npm ci failed:"; tail -20 "$WORK/npm-ci.log"
  fi
fi

# ------------------------------------------------------------------ pollend

if [ -n "$POLLEND" ]; then
  HOST=127.0.0.1
  read -r PORT GOSSIP <<< "$("$PY" "$HERE/../free_ports.py" 2 | tr '\n' ' ')"
  RUN_DIR=$WORK/pollend
  mkdir -p "$RUN_DIR"
  SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  (cd "$RUN_DIR" && exec env POLLEN_SECRET="$SECRET" "$POLLEND" --resp-bind "127.0.0.1:$PORT" \
    --gossip-bind "127.0.0.1:$GOSSIP" --http-bind '' --node-name clients-1 >"$RUN_DIR/pollend.log" 2>&1) &
  PID=$!
  up=0
  for _ in $(seq 1 200); do
    kill -0 "$PID" 2>/dev/null || break
    if [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$PORT" PING 2>/dev/null)" = "PONG" ]; then up=1; break; fi
    sleep 0.1
  done
  if [ "$up" != 1 ]; then
    echo "run.sh: pollend did not answer PING on 127.0.0.1:$PORT; its log:"
    tail -30 "$RUN_DIR/pollend.log"
    echo "0 passed, 1 failed"
    exit 1
  fi
  echo "run.sh: pollend $("$POLLEND" --version 2>/dev/null | head -1) (pid $PID) on resp 127.0.0.1:$PORT, gossip 127.0.0.1:$GOSSIP"
else
  if [ "$(timeout 5 redis-cli -h "$HOST" -p "$PORT" PING 2>/dev/null)" != "PONG" ]; then
    echo "run.sh: no server answers PING on $HOST:$PORT"
    echo "0 passed, 1 failed"
    exit 1
  fi
  echo "run.sh: server at $HOST:$PORT"
fi

# ------------------------------------------------------------------ suites
TOTAL_P=0
TOTAL_F=0
SUMMARY=()

# run_suite NAME TIMEOUT_S COMMAND...
run_suite() {
  local name=$1 limit=$2
  shift 2
  local log="$WORK/$name.log"
  echo
  echo "=== $name"
  timeout -k 5 "$limit" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local last p f
  last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  if [ -z "$last" ]; then
    p=0; f=1
    [ "$rc" = 124 ] && echo "run.sh: $name timed out after ${limit}s"
    echo "run.sh: $name printed no result line (exit code $rc): counted as 1 failure"
  else
    p=${last%% passed*}
    f=${last#*passed, }; f=${f%% failed*}
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
      f=1
      echo "run.sh: $name exited $rc with no failed check: counted as 1 failure"
    fi
  fi
  TOTAL_P=$((TOTAL_P + p))
  TOTAL_F=$((TOTAL_F + f))
  SUMMARY+=("$(printf '%-10s %s passed, %s failed' "$name" "$p" "$f")")
}

run_suite redis-py 300 "$PY" "$HERE/redis_py_test.py" "$HOST" "$PORT"

if [ "$NODE_READY" = 1 ]; then
  run_suite node 300 node "$NODE_DIR/node_clients_test.js" "$HOST" "$PORT"
else
  echo; echo "=== node"; echo "run.sh: skipped: npm ci failed (counted as 1 failure)"
  TOTAL_F=$((TOTAL_F + 1)); SUMMARY+=("$(printf '%-10s npm ci failed' node)")
fi

if cc -std=c11 -O1 -Wall -o "$WORK/hiredis_test" "$HERE/hiredis_test.c" -lhiredis >"$WORK/cc.log" 2>&1; then
  run_suite hiredis 120 "$WORK/hiredis_test" "$HOST" "$PORT"
else
  echo; echo "=== hiredis"; cat "$WORK/cc.log"; echo "run.sh: hiredis_test.c did not build (counted as 1 failure)"
  TOTAL_F=$((TOTAL_F + 1)); SUMMARY+=("$(printf '%-10s build failed' hiredis)")
fi

run_suite redis-cli 300 bash "$HERE/redis_cli_test.sh" "$HOST" "$PORT"

if [ -n "$PID" ]; then
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "run.sh: pollend died during the run; its log:"; tail -30 "$WORK/pollend/pollend.log"
    TOTAL_F=$((TOTAL_F + 1)); SUMMARY+=("pollend    died during the run")
  fi
  stop_pollend
fi

echo
echo "=== summary ($HOST:$PORT)"
printf '%s\n' "${SUMMARY[@]}"
echo "$TOTAL_P passed, $TOTAL_F failed"
[ "$TOTAL_F" = 0 ]
