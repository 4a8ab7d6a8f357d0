#!/usr/bin/env bash
# clients_python_pip_install_test: `pip install clients/python` into a fresh
# venv, offline (Debian's redis-py, setuptools and wheel come in through
# --system-site-packages), from a copy of the source so the tree stays clean;
# then, outside the source tree, the installed package (not the tree's)
# imports with its Scrapy dupefilter, has pyproject's version, and dedups
# against a real pollend.
#   pip_install_test.sh SOURCE_DIR WORK_DIR POLLEND
set -euo pipefail
SRC=$1 WORK=$2 POLLEND=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK"
cp -r "$SRC/clients/python" "$WORK/src"
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install --no-index --no-build-isolation --no-deps "$WORK/src" > "$WORK/pip.log" 2>&1 ||
  { cat "$WORK/pip.log"; fail "pip install"; }
want=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$SRC/clients/python/pyproject.toml")
got=$("$WORK/venv/bin/pip" show pollen-client | sed -n 's/^Version: //p')
[ -n "$want" ] && [ "$got" = "$want" ] || fail "installed version '$got', pyproject says '$want'"

read -r RESP GOSSIP <<< "$(/usr/bin/python3 "$SRC/tests/free_ports.py" 2 | tr '\n' ' ')"
POLLEN_SECRET=$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \n') "$POLLEND" --node-name pip \
  --gossip-bind "127.0.0.1:$GOSSIP" --resp-bind "127.0.0.1:$RESP" --http-bind "" --log-level warn \
  > "$WORK/pollend.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true; wait $PID 2>/dev/null || true' EXIT

cd "$WORK"  # not the source tree: only the installed package can be imported
"$WORK/venv/bin/python" - "$WORK/venv" "$RESP" <<'PY' || { cat "$WORK/pollend.log"; fail "the installed package"; }
import os, sys, time
venv, port = sys.argv[1], int(sys.argv[2])
import pollen, pollen.client, pollen.scrapy
where = os.path.realpath(pollen.__file__)
assert where.startswith(os.path.realpath(venv) + os.sep), "imported from " + where
assert hasattr(pollen.scrapy, "PollenDupeFilter")
s = pollen.SeenSet(["redis://127.0.0.1:%d" % port], "pip:seen")
for _ in range(100):  # pollend may still be starting
    try:
        s.reserve(0.001, 10000)
        break
    except Exception:
        time.sleep(0.1)
assert s.seen_add(["a", "b"]) == [False, False]
assert s.seen_add(["a", "c"]) == [True, False]
print("installed pollen-client from", os.path.dirname(where), "dedups: ok")
PY
