"""A pollend cluster on loopback for the client tests: real processes, free
ports, one shared secret. POLLEND names the binary (ctest sets it)."""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, nodes=3):
        self.binary = os.environ.get("POLLEND")
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise RuntimeError("set POLLEND to the pollend binary")
        self.dir = tempfile.mkdtemp(prefix="pollen-client-test-")
        env = dict(os.environ, POLLEN_SECRET=secrets.token_hex(32))
        self.procs, self.resp_ports, self.http_ports = [], [], []
        seed = None
        for i in range(nodes):
            proc, gossip, resp, http = self._start(i, env, seed)
            seed = seed or "127.0.0.1:%d" % gossip
            self.procs.append(proc)
            self.resp_ports.append(resp)
            self.http_ports.append(http)
        try:
            for i in range(nodes):
                self._wait(lambda: self.alive_members(i) == nodes, "node %d to see %d alive members" % (i + 1, nodes))
        except RuntimeError as e:
            # What each node said and whether it still runs: a start that
            # timed out once (under load, 2026-11-28) left nothing to read.
            report = [str(e)]
            for i, p in enumerate(self.procs):
                report.append("n%d (%s, %d alive seen):\n%s" % (i + 1, "running" if p.poll() is None else
                              "exited %s" % p.returncode, self.alive_members(i), self.log(i)[-2000:]))
            self.stop()
            raise RuntimeError("\n".join(report)) from None

    def _start(self, i, env, seed, attempts=5):
        """Starts node i on free ports. A port found free can be taken by
        another test before pollend binds it (ctest runs two at once: CI,
        2026-11-28, "cannot listen on 127.0.0.1:60815: Address already in
        use"); then the node is started again on other ports. Any other
        failure is left to the caller's wait, which reports the log."""
        log_path = os.path.join(self.dir, "n%d.log" % (i + 1))
        for _ in range(attempts):
            gossip, resp, http = free_port(), free_port(), free_port()
            args = [self.binary, "--node-name", "n%d" % (i + 1), "--gossip-bind", "127.0.0.1:%d" % gossip,
                    "--resp-bind", "127.0.0.1:%d" % resp, "--http-bind", "127.0.0.1:%d" % http,
                    "--log-level", "warn"]
            if seed:
                args += ["--seeds", seed]
            with open(log_path, "w") as log:
                proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
            # Listening (the HTTP port is bound last) or exited, whichever first.
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline and not self._answers(http):
                time.sleep(0.05)
            if proc.poll() is None:
                return proc, gossip, resp, http
            with open(log_path) as f:
                if "Address already in use" not in f.read():
                    return proc, gossip, resp, http
        return proc, gossip, resp, http

    @staticmethod
    def _answers(http_port):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=2):
                return True
        except OSError:
            return False

    @property
    def urls(self):
        return ["redis://127.0.0.1:%d" % p for p in self.resp_ports]

    def alive_members(self, i):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http_ports[i], timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith('pollen_members{state="alive"}'):
                        return int(float(line.split()[1]))
        except OSError:
            return 0
        return 0

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def stop(self, keep_logs=False):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        if not keep_logs:
            shutil.rmtree(self.dir, ignore_errors=True)

    def log(self, i):
        with open(os.path.join(self.dir, "n%d.log" % (i + 1))) as f:
            return f.read()

    @staticmethod
    def _wait(ready, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.1)
        raise RuntimeError("timed out waiting for " + what)
