#!/usr/bin/env python3
"""Run the differential table against a live server and compare replies byte for byte.

  run.py --pollend PATH [files...]
      For each case file (default: every *.cases next to this script) start a fresh
      pollend on free loopback ports, wait until PING answers, run the file's
      '@pollen-setup' commands, then its cases in order on one connection, then
      stop pollend (SIGTERM, SIGKILL after 10 s).

  run.py --server HOST:PORT [--anchor] [files...]
      Run against a server that is already running. With --anchor the server is the
      RedisBloom anchor: before each file it is flushed (FLUSHALL) and the file's
      '@anchor-setup' commands are run, as record.py does. Without --anchor (a
      pollend) the file's '@pollen-setup' commands are run, then the cases.

Prints 'FILE: N passed, M failed' per file, each failure with the command and the
expected and actual replies, and finally 'N passed, M failed'. Exit status 1 if any
case failed, 2 on a usage or file-format error, 0 otherwise.
"""

import argparse
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True   # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resptable as rt  # noqa: E402

CASE_TIMEOUT = 10.0      # seconds to wait for one reply
START_TIMEOUT = 10.0     # seconds for a fresh pollend to answer PING
STOP_TIMEOUT = 10.0      # seconds between SIGTERM and SIGKILL
START_ATTEMPTS = 5       # fresh ports per file when pollend cannot bind
SECRET = "ab" * 32       # the cluster secret of the test nodes (hex, 32 bytes)


# ---------------------------------------------------------------------------
# pollend

def _port_is_free(port):
    """True if 127.0.0.1:port can be bound for TCP and UDP right now."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def _pick_ports():
    while True:
        resp = random.randint(20000, 60999)
        gossip = random.randint(20000, 60999)
        if resp != gossip and _port_is_free(resp) and _port_is_free(gossip):
            return resp, gossip


def _ping(port):
    try:
        conn = rt.Connection("127.0.0.1", port, timeout=1.0)
    except OSError:
        return False
    try:
        return conn.call([b"PING"]) == rt.Value("+", b"PONG")
    except (rt.ConnectionLost, OSError, ValueError):
        return False
    finally:
        conn.close()


class Pollend:
    """One pollend process on random loopback ports, in its own temp directory."""

    def __init__(self, path):
        self.path = path
        self.proc = None
        self.port = None
        self.tmp = None
        self.log_path = None

    def start(self):
        last = ""
        for _ in range(START_ATTEMPTS):
            self.tmp = tempfile.mkdtemp(prefix="pollen-diff-")
            self.log_path = os.path.join(self.tmp, "pollend.log")
            resp, gossip = _pick_ports()
            env = {k: v for k, v in os.environ.items() if not k.startswith("POLLEN_")}
            env["POLLEN_SECRET"] = SECRET
            cmd = [self.path,
                   "--resp-bind", "127.0.0.1:%d" % resp,
                   "--gossip-bind", "127.0.0.1:%d" % gossip,
                   "--http-bind", "",
                   "--node-name", "diff-1"]
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(cmd, cwd=self.tmp, env=env, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT)
            self.port = resp
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if _ping(resp):
                    return
                time.sleep(0.05)
            last = self._log_tail()
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError("pollend did not answer PING within %.0f s; log:\n%s"
                                   % (START_TIMEOUT, last))
            code = self.proc.returncode
            self._cleanup()
            if "in use" not in last.lower() and "bind" not in last.lower():
                raise RuntimeError("pollend exited with status %s at start; log:\n%s" % (code, last))
            # Lost a race for a port: try other ports.
        raise RuntimeError("pollend could not bind after %d attempts; last log:\n%s"
                           % (START_ATTEMPTS, last))

    def _log_tail(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def exited_early(self):
        """The exit status if pollend has already exited, else None."""
        return self.proc.poll() if self.proc else None

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT. Returns the exit status."""
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
        self._cleanup()
        return code

    def _cleanup(self):
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


# ---------------------------------------------------------------------------
# Running one file

class Failure:
    def __init__(self, case, actual_lines):
        self.case = case
        self.actual_lines = actual_lines


def run_cases(cf, host, port, anchor_setup):
    """Runs every case of cf on one connection; returns (passed, [Failure])."""
    passed = 0
    failures = []
    conn = rt.Connection(host, port, timeout=CASE_TIMEOUT)
    broken = None   # why the remaining cases cannot run
    try:
        setup = [[b"FLUSHALL"]] + cf.anchor_setup if anchor_setup else cf.pollen_setup
        for args in setup:
            reply = conn.call(args)
            if reply.kind in "-!":
                raise RuntimeError("setup %r failed: %s" % (args, rt.render_lines(reply)))
        for case in cf.cases:
            if broken:
                failures.append(Failure(case, ["<not run: %s>" % broken]))
                continue
            try:
                actual = conn.call(case.args)
            except (rt.ConnectionLost, ValueError) as e:
                failures.append(Failure(case, ["<%s>" % e]))
                conn.close()
                try:   # carry on with a new connection (its state is fresh)
                    conn = rt.Connection(host, port, timeout=CASE_TIMEOUT)
                except OSError as e2:
                    broken = "cannot reconnect: %s" % e2
                continue
            if rt.matches(case.expected, actual):
                passed += 1
            else:
                failures.append(Failure(case, rt.render_lines(actual)))
    finally:
        conn.close()
    return passed, failures


def print_failures(name, failures, out):
    for f in failures:
        print("  FAIL %s:%d: > %s" % (name, f.case.line_no, f.case.command), file=out)
        print("    expected:", file=out)
        for line in f.case.expected_text:
            print("      " + line, file=out)
        print("    actual:", file=out)
        for line in f.actual_lines:
            print("      " + line, file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--pollend", help="path of the pollend binary to start per file")
    target.add_argument("--server", help="HOST:PORT of a running server")
    ap.add_argument("--anchor", action="store_true",
                    help="with --server: FLUSHALL and run '@anchor-setup' lines before each file")
    ap.add_argument("files", nargs="*")
    opts = ap.parse_args()
    if opts.anchor and not opts.server:
        ap.error("--anchor needs --server")
    if opts.pollend:
        opts.pollend = os.path.abspath(opts.pollend)  # each pollend runs in its own temp directory
    files = opts.files or sorted(glob.glob(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "*.cases")))
    if not files:
        ap.error("no case files")
    try:
        case_files = [rt.load_case_file(p) for p in files]
    except (rt.FormatError, OSError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    if opts.server:
        host, _, port = opts.server.rpartition(":")
        if not host or not port.isdigit():
            ap.error("--server wants HOST:PORT")
        port = int(port)
    elif not os.access(opts.pollend, os.X_OK) or not os.path.isfile(opts.pollend):
        ap.error("not an executable: %s" % opts.pollend)

    total_pass = total_fail = 0
    out = sys.stdout
    for cf in case_files:
        name = os.path.basename(cf.path)
        node = None
        note = ""
        try:
            if opts.pollend:
                node = Pollend(opts.pollend)
                node.start()
                passed, failures = run_cases(cf, "127.0.0.1", node.port, False)
            else:
                passed, failures = run_cases(cf, host, port, opts.anchor)
        except (RuntimeError, OSError, rt.ConnectionLost) as e:
            passed = 0
            failures = [Failure(c, ["<not run: %s>" % str(e).splitlines()[0]]) for c in cf.cases]
            note = str(e)
        finally:
            if node is not None:
                early = node.exited_early()
                code = node.stop()
                if early is not None:
                    note += "\n  pollend exited during the run with status %s" % early
                elif code not in (0, None):
                    note += "\n  pollend exited with status %s after SIGTERM" % code
        total_pass += passed
        total_fail += len(failures)
        print("%s: %d passed, %d failed" % (name, passed, len(failures)), file=out)
        if note.strip():
            for line in note.strip().splitlines():
                print("  " + line.strip(), file=out)
        print_failures(name, failures, out)
        out.flush()
    print("%d passed, %d failed" % (total_pass, total_fail), file=out)
    return 1 if total_fail else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
