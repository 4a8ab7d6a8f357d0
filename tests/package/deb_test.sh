#!/usr/bin/env bash
# package_deb_test: cpack -G DEB -> pollen_<version>_amd64.deb; checks its
# control data and file list; unpacks it into a scratch root and runs the
# binaries from there; then, as root with dpkg (CI), installs it on the
# machine: the pollen user, /etc/pollen/{pollend.conf,secret}, the data dir;
# runs the unit's ExecStart as the pollen user for a one-node smoke test
# (BF.ADD / BF.EXISTS, a snapshot in /var/lib/pollen, a clean SIGTERM);
# purges it and checks its files, configuration and data are gone (the
# `pollen` system user stays, as Debian's policy asks). Exit 77 (skipped)
# for the machine-wide part only when not root, without dpkg, or when a
# pollen package this test did not install is there.
#   deb_test.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
BUILD=$1 WORK=$2 VERSION=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK"

# 1. Build the package.
(cd "$BUILD" && cpack -G DEB -B "$WORK/out" > "$WORK/cpack.log" 2>&1) || { cat "$WORK/cpack.log"; fail "cpack"; }
ARCH=$(dpkg --print-architecture 2> /dev/null || echo amd64)
DEB="$WORK/out/pollen_${VERSION}_${ARCH}.deb"
[ -f "$DEB" ] || { ls -la "$WORK/out"; fail "no $DEB"; }
echo "built $(basename "$DEB") ($(stat -c %s "$DEB") bytes)"

# 2. Control data and contents.
dpkg-deb --field "$DEB" Package Version Architecture Depends > "$WORK/control"
grep -qx "Package: pollen" "$WORK/control" || fail "package name: $(cat "$WORK/control")"
grep -qx "Version: $VERSION" "$WORK/control" || fail "version: $(cat "$WORK/control")"
grep -qx "Architecture: $ARCH" "$WORK/control" || fail "architecture"
for dep in adduser libsodium libprotobuf libc6; do
  grep -q "^Depends:.*$dep" "$WORK/control" || fail "Depends lacks $dep: $(grep Depends "$WORK/control")"
done
dpkg-deb --contents "$DEB" | awk '{print $6}' > "$WORK/files"
for f in ./usr/bin/pollend ./usr/bin/pollenctl ./usr/bin/pollen-sim ./usr/lib/systemd/system/pollend.service \
         ./usr/share/pollen/pollend.conf ./usr/share/doc/pollen/examples/pollend.example.conf \
         ./usr/share/doc/pollen/runbook.md; do
  grep -qx "$f" "$WORK/files" || fail "missing $f in the package"
done
# Only the node's files: no static libraries or headers.
if grep -q -e '\.a$' -e '/include/' "$WORK/files"; then fail "development files in the package"; fi
dpkg-deb --ctrl-tarfile "$DEB" | tar -t > "$WORK/ctrl"
for s in postinst prerm postrm; do grep -qx "./$s" "$WORK/ctrl" || fail "no $s script"; done

# 3. A scratch root: the unpacked binaries run.
dpkg-deb -x "$DEB" "$WORK/root"
[ "$("$WORK/root/usr/bin/pollend" --version)" = "pollend $VERSION" ] || fail "pollend --version from the scratch root"
"$WORK/root/usr/bin/pollenctl" --help > /dev/null || fail "pollenctl --help"
[ "$("$WORK/root/usr/bin/pollenctl" --version)" = "pollenctl $VERSION" ] || fail "pollenctl --version"
"$WORK/root/usr/bin/pollen-sim" --help > /dev/null || fail "pollen-sim --help"
[ "$("$WORK/root/usr/bin/pollen-sim" --version)" = "pollen-sim $VERSION" ] || fail "pollen-sim --version"
grep -q "^ExecStart=/usr/bin/pollend " "$WORK/root/usr/lib/systemd/system/pollend.service" || fail "unit ExecStart"
echo "scratch root: ok"

# 4. On the machine (root, dpkg): install, smoke test, purge.
if [ "$(id -u)" != 0 ] || ! command -v dpkg > /dev/null; then
  echo "SKIP: the machine-wide install needs root and dpkg (the scratch-root checks passed)"
  exit 77
fi
# One run at a time on this machine (ctest's RESOURCE_LOCK covers one ctest
# only); a marker says a leftover install is this test's own (a run killed
# by its timeout never reached its cleanup).
exec 9> /tmp/pollen-deb-test.lock
flock 9
MARKER=/tmp/pollen-deb-test.installed
if dpkg -s pollen > /dev/null 2>&1; then
  if [ ! -e "$MARKER" ]; then
    echo "SKIP: a pollen package this test did not install is here; not replacing it (the scratch-root checks passed)"
    exit 77
  fi
  dpkg --purge pollen > /dev/null
fi
touch "$MARKER"
SMOKE_PID=
cleanup() {
  [ -n "$SMOKE_PID" ] && kill -KILL "$SMOKE_PID" 2> /dev/null || true
  dpkg --purge pollen > /dev/null 2>&1 && rm -f "$MARKER"
}
trap cleanup EXIT
dpkg -i "$DEB" > "$WORK/dpkg-i.log" 2>&1 || { cat "$WORK/dpkg-i.log"; fail "dpkg -i"; }
[ "$(/usr/bin/pollend --version)" = "pollend $VERSION" ] || fail "installed pollend --version"
getent passwd pollen > /dev/null || fail "no pollen user"
if [ -d /run/systemd/system ]; then
  # Under systemd the postinst started the unit on the default ports; the
  # smoke test runs its command line itself, on free ports.
  systemctl is-enabled --quiet pollend || fail "pollend.service not enabled by the postinst"
  systemctl stop pollend
fi
[ "$(stat -c '%U %a' /etc/pollen/secret)" = "pollen 600" ] || fail "secret: $(stat -c '%U %a' /etc/pollen/secret)"
[ "$(stat -c '%U %a' /var/lib/pollen)" = "pollen 700" ] || fail "data dir: $(stat -c '%U %a' /var/lib/pollen)"
grep -q "^node-name = [A-Za-z0-9._-]\+$" /etc/pollen/pollend.conf || fail "node-name in /etc/pollen/pollend.conf"
/usr/bin/pollend --config /etc/pollen/pollend.conf --secret-file /etc/pollen/secret --print-config \
  > "$WORK/check.log" 2>&1 || { cat "$WORK/check.log"; fail "the installed configuration does not check"; }

# The unit's own command line, as the unit's user, on free loopback ports
# (the defaults may be taken on a shared machine).
read -r RESP GOSSIP HTTP <<< "$(python3 "$(dirname "$0")/../free_ports.py" 3 | tr '\n' ' ')"
read -r -a CMD <<< "$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/pollend.service)"
setpriv --reuid=pollen --regid=pollen --init-groups -- "${CMD[@]}" --resp-bind "127.0.0.1:$RESP" --gossip-bind "127.0.0.1:$GOSSIP" \
  --http-bind "127.0.0.1:$HTTP" > "$WORK/pollend.log" 2>&1 &
SMOKE_PID=$!
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$RESP" PING 2> /dev/null)" = PONG ] && break
  kill -0 "$SMOKE_PID" 2> /dev/null || { cat "$WORK/pollend.log"; fail "pollend exited"; }
  sleep 0.1
done
[ "$(redis-cli -p "$RESP" BF.ADD smoke:seen https://example.org/a)" = 1 ] || fail "BF.ADD"
[ "$(redis-cli -p "$RESP" BF.EXISTS smoke:seen https://example.org/a)" = 1 ] || fail "BF.EXISTS"
[ "$(redis-cli -p "$RESP" BF.EXISTS smoke:seen https://example.org/never)" = 0 ] || fail "BF.EXISTS absent"
redis-cli -p "$RESP" POLLEN.SNAPSHOT > "$WORK/snapshot.out" || fail "POLLEN.SNAPSHOT"
[ -n "$(find /var/lib/pollen -type f -user pollen -print -quit)" ] || fail "nothing written by pollen in /var/lib/pollen"
python3 - "$HTTP" <<'PY' || fail "/readyz"
import sys, urllib.request
assert urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=10).status == 200
PY
kill -TERM "$SMOKE_PID"
rc=0; wait "$SMOKE_PID" || rc=$?
SMOKE_PID=
[ "$rc" = 0 ] || { cat "$WORK/pollend.log"; fail "pollend exited $rc on SIGTERM"; }
echo "installed node: ok"

dpkg --purge pollen > "$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log"; fail "dpkg --purge"; }
for gone in /usr/bin/pollend /usr/lib/systemd/system/pollend.service /etc/pollen /var/lib/pollen; do
  [ ! -e "$gone" ] || fail "$gone left after purge"
done
rm -f "$MARKER"
trap - EXIT
echo "purge: ok"
