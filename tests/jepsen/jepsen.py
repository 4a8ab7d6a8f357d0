#!/usr/bin/python3
"""Jepsen-style fault test: five real pollend processes, each in its own
network namespace on a bridge this test creates, under a workload of
concurrent adds at every node and a seeded nemesis that kills, pauses,
partitions (symmetric and one-way), drops traffic and slows links (a token
bucket that queues packets up to 500 ms). Then everything heals
and the test checks what Pollen promises:

  1. no node crashed (only the nemesis ends processes);
  2. read-your-writes at the acknowledging node: a key a node acknowledged
     (appendfsync always) reads present there at every later read, across
     SIGKILLs and restarts;
  3. convergence: every acknowledged add reads present on every node within
     --converge-timeout seconds of the heal;
  4. membership settles: every node lists all five alive within
     --converge-timeout seconds.

Usage (root; network namespaces, a bridge, veth pairs and iptables rules
inside the namespaces; all of them removed at exit):

  jepsen.py --pollend PATH [--seconds 40] [--seed N] [--nodes 5] [--writers 2]
            [--rate 5000] [--converge-timeout 60] [--keep-dir]
            [--nemesis random|heal-under-load] [--busy-loops N]

--nemesis heal-under-load (issue 11's Lifeguard measurement) replaces the
random faults: busy loops saturate every core for the whole run, the
cluster splits in two for --seconds under the workload, then heals, and the
run reports how long after the heal every add converged and the membership
settled (every node lists all alive, and keeps doing so for 5 s).

Bounded: addresses 10.213.77.0/24 only, namespaces named pollen-jepsen-N, a
bridge named pjepbr0, and a global lock so two runs never overlap. Prints the
seed and the command that replays it first. Exits 0 when every check passed,
1 when one failed, 77 (ctest: skipped) only when this machine cannot create
network namespaces (not root, or no support) and POLLEN_JEPSEN_REQUIRED is
not 1.
"""

import argparse
import fcntl
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import redis

SUBNET = "10.213.77"
HOST_IP = SUBNET + ".254"  # the bridge's address: where the clients and checks run from
BRIDGE = "pjepbr0"
NS_PREFIX = "pollen-jepsen-"
VETH_PREFIX = "pjep-v"
LOCK_PATH = "/tmp/pollen-jepsen.lock"
GOSSIP_PORT, RESP_PORT, HTTP_PORT = 7946, 6380, 9464
FILTER = "jepsen"
BATCH = 10  # keys per BF.MADD
SKIP = 77

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.2f}s] {msg}", flush=True)


def run(*args, check=True):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


# ---- the network: namespaces, veth pairs, a bridge --------------------------

class Network:
    """Owns every namespace, link and rule it makes; teardown() removes them."""

    def __init__(self, count):
        self.count = count
        self.forward_rule = False

    @staticmethod
    def ns(i):
        return f"{NS_PREFIX}{i}"

    @staticmethod
    def ip(i):
        return f"{SUBNET}.{i}"

    def setup(self):
        self.teardown()  # leftovers of a run that was SIGKILLed
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        # With br_netfilter loaded, bridged frames traverse the host's FORWARD
        # chain (a DROP policy there, as Docker sets, would cut the nodes off
        # from each other): accept exactly this bridge's own traffic.
        if _read("/proc/sys/net/bridge/bridge-nf-call-iptables") == "1":
            run("iptables", "-I", "FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT")
            self.forward_rule = True
        for i in range(1, self.count + 1):
            ns, host_end, ns_end = self.ns(i), f"{VETH_PREFIX}{i}", f"{VETH_PREFIX}{i}p"
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            run("ip", "link", "set", ns_end, "netns", ns)
            run("ip", "link", "set", host_end, "master", BRIDGE, "up")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            run("ip", "netns", "exec", ns, "ip", "link", "set", ns_end, "name", "eth0")
            run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")

    def teardown(self):
        for ns in _namespaces():
            if ns.startswith(NS_PREFIX):
                # Deleting a namespace does not end its processes (a SIGKILLed
                # run's nodes would live on): kill them first.
                for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                run("ip", "netns", "del", ns, check=False)  # takes its veth end along
        # A namespace's deletion frees its veth pair asynchronously: delete the host ends now.
        for link in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
            name = link.split(":")[1].strip().split("@")[0]
            if name.startswith(VETH_PREFIX):
                run("ip", "link", "del", name, check=False)
        run("ip", "link", "del", BRIDGE, check=False)
        while run("iptables", "-D", "FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT",
                  check=False).returncode == 0:
            pass
        self.forward_rule = False

    def iptables(self, i, *rule):
        run("ip", "netns", "exec", self.ns(i), "iptables", *rule)

    def partition(self, a, b):
        """Cuts every link between the node ids in a and those in b, both ways."""
        for x, ys in ((a, b), (b, a)):
            for i in x:
                for j in ys:
                    self.iptables(i, "-A", "INPUT", "-s", Network.ip(j), "-j", "DROP")
                    self.iptables(i, "-A", "OUTPUT", "-d", Network.ip(j), "-j", "DROP")

    def heal(self):
        for i in range(1, self.count + 1):
            self.iptables(i, "-F", "INPUT")
            self.iptables(i, "-F", "OUTPUT")
            run("ip", "netns", "exec", self.ns(i), "tc", "qdisc", "del", "dev", "eth0", "root", check=False)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _namespaces():
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


# ---- the nodes ---------------------------------------------------------------

class Node:
    def __init__(self, i, count, pollend, workdir, secret):
        self.i = i
        self.ip = Network.ip(i)
        self.pollend = pollend
        self.data_dir = os.path.join(workdir, f"n{i}")
        self.log_path = os.path.join(workdir, f"n{i}.log")
        self.config_path = os.path.join(workdir, "jepsen.conf")
        self.secret = secret
        self.seeds = ",".join(f"{Network.ip(j)}:{GOSSIP_PORT}" for j in range(1, count + 1) if j != i)
        self.proc = None
        self.killed_by_nemesis = False  # the current process's end is expected
        self.paused = False
        self.crashes = []  # (exit status, time) of ends the nemesis did not cause
        os.makedirs(self.data_dir, exist_ok=True)

    def start(self):
        args = ["ip", "netns", "exec", Network.ns(self.i), self.pollend, "--config", self.config_path,
                "--node-name", f"n{self.i}", "--gossip-bind", f"{self.ip}:{GOSSIP_PORT}", "--seeds", self.seeds,
                "--resp-bind", f"{self.ip}:{RESP_PORT}", "--http-bind", f"{self.ip}:{HTTP_PORT}",
                "--data-dir", self.data_dir]
        env = dict(os.environ, POLLEN_SECRET=self.secret)
        with open(self.log_path, "a") as logf:
            # `ip netns exec` execs pollend, so this pid is pollend's.
            self.proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, env=env)
        self.killed_by_nemesis = False
        self.paused = False

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        self.check_alive()  # an end before this one was not the nemesis's: record it
        self.killed_by_nemesis = True
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def pause(self):
        self.paused = True
        self.signal(signal.SIGSTOP)

    def resume(self):
        self.paused = False
        self.signal(signal.SIGCONT)

    def check_alive(self):
        """Records an end the nemesis did not cause; returns True while running."""
        if self.proc is None:
            return False
        status = self.proc.poll()
        if status is None:
            return True
        if not self.killed_by_nemesis:
            self.crashes.append((status, time.monotonic() - T0))
            self.killed_by_nemesis = True  # record it once
        return False

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.ip}:{HTTP_PORT}/metrics", timeout=2) as r:
            return r.read().decode()

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://{self.ip}:{HTTP_PORT}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def client(self, timeout=2.0):
        return redis.Redis(host=self.ip, port=RESP_PORT, socket_timeout=timeout, socket_connect_timeout=timeout)


def members_by_state(metrics_text):
    out = {}
    for m in re.finditer(r'^pollen_members\{state="([a-z]+)"\} ([0-9.e+]+)$', metrics_text, re.M):
        out[m.group(1)] = int(float(m.group(2)))
    return out


# ---- the workload --------------------------------------------------------------

class Writer(threading.Thread):
    """Adds fresh keys at one node in BF.MADD batches, recording every
    acknowledged key; after each acknowledged batch it reads back a sample of
    its earlier acknowledged keys at the same node (all must be present)."""

    def __init__(self, node, index, stop, seed, pause):
        super().__init__(daemon=True)
        self.node = node
        self.prefix = f"n{node.i}w{index}-"
        self.stop = stop
        self.rng = random.Random(seed)
        self.acked = []
        self.indeterminate = 0  # batches with no answer (timeout, reset): may or may not be in
        self.errors = []        # error replies (should be none)
        self.lost = []          # acknowledged keys a later read at the same node missed
        self.seq = 0
        self.pause = pause  # seconds between batches (the --rate limit)

    def run(self):
        try:
            self.write_until_stopped()
        except Exception as e:  # recorded, so a dead writer fails the run instead of thinning the workload
            self.errors.append(f"writer died: {e!r}")

    def write_until_stopped(self):
        conn = None
        while not self.stop.wait(self.pause):
            if conn is None:
                conn = self.node.client()
            keys = [f"{self.prefix}{self.seq + k}" for k in range(BATCH)]
            self.seq += BATCH
            try:
                reply = conn.execute_command("BF.MADD", FILTER, *keys)
            except redis.ResponseError as e:
                self.errors.append(str(e))
                continue
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self.indeterminate += 1
                conn.close()
                conn = None
                self.stop.wait(0.2)
                continue
            if not isinstance(reply, list) or len(reply) != BATCH or any(r not in (0, 1) for r in reply):
                self.errors.append(f"BF.MADD reply {reply!r}")
                continue
            self.acked.extend(keys)
            sample = self.rng.sample(self.acked, min(20, len(self.acked)))
            try:
                seen = conn.execute_command("BF.MEXISTS", FILTER, *sample)
            except redis.ResponseError as e:
                self.errors.append(f"BF.MEXISTS: {e}")
                continue
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                conn.close()
                conn = None
                continue
            for key, present in zip(sample, seen):
                if present != 1:
                    self.lost.append((key, time.monotonic() - T0))
        if conn is not None:
            conn.close()


# ---- the nemesis ----------------------------------------------------------------

class Nemesis:
    """One fault at a time, each held 1-4 s, then healed; choices from the seed."""

    FAULTS = ("kill", "pause", "partition", "one-way", "loss", "slow")

    def __init__(self, net, nodes, rng):
        self.net, self.nodes, self.rng = net, nodes, rng
        self.counts = {f: 0 for f in self.FAULTS}

    def ids(self):
        return [n.i for n in self.nodes]

    def step(self):
        fault = self.rng.choice(self.FAULTS)
        hold = self.rng.uniform(1.0, 4.0)
        self.counts[fault] += 1
        if fault == "kill":
            victims = self.rng.sample(self.nodes, self.rng.choice((1, 1, 2)))
            log(f"nemesis: SIGKILL {_names(victims)} for {hold:.1f}s")
            for n in victims:
                n.kill()
            time.sleep(hold)
            for n in victims:
                n.start()
            log(f"nemesis: restarted {_names(victims)}")
        elif fault == "pause":
            victims = self.rng.sample(self.nodes, self.rng.choice((1, 1, 2)))
            log(f"nemesis: SIGSTOP {_names(victims)} for {hold:.1f}s")
            for n in victims:
                n.pause()
            time.sleep(hold)
            for n in victims:
                n.resume()
        elif fault in ("partition", "one-way"):
            ids = self.ids()
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) // 2)
            a, b = sorted(ids[:cut]), sorted(ids[cut:])
            if fault == "partition":
                log(f"nemesis: partition {a} | {b} for {hold:.1f}s")
                self.net.partition(a, b)
            else:
                log(f"nemesis: one-way {b} -/-> {a} for {hold:.1f}s")
                for i in a:
                    for j in b:
                        self.net.iptables(i, "-A", "INPUT", "-s", Network.ip(j), "-j", "DROP")
            time.sleep(hold)
            self.net.heal()
        elif fault == "slow":
            # A congested link (this kernel has no sch_netem): a token bucket
            # on the egress queues packets up to `latency` (delaying them) and
            # drops what overflows it.
            victims = self.rng.sample(self.ids(), self.rng.randint(1, len(self.nodes)))
            rate = self.rng.choice(("64kbit", "256kbit", "1mbit"))
            log(f"nemesis: slow egress ({rate}, queueing up to 500ms) at {sorted(victims)} for {hold:.1f}s")
            for i in victims:
                run("ip", "netns", "exec", Network.ns(i), "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
                    "rate", rate, "burst", "8kb", "latency", "500ms")
            time.sleep(hold)
            self.net.heal()
        else:  # loss: drop a share of the node-to-node packets arriving at some nodes
            victims = self.rng.sample(self.ids(), self.rng.randint(1, len(self.nodes)))
            p = self.rng.choice((0.2, 0.5, 0.9))
            log(f"nemesis: drop {p:.0%} of peer packets into {sorted(victims)} for {hold:.1f}s")
            for i in victims:
                self.net.iptables(i, "-A", "INPUT", "-m", "iprange", "--src-range",
                                  f"{Network.ip(1)}-{Network.ip(len(self.nodes))}", "-m", "statistic",
                                  "--mode", "random", "--probability", str(p), "-j", "DROP")
            time.sleep(hold)
            self.net.heal()
        for n in self.nodes:
            n.check_alive()
        time.sleep(self.rng.uniform(0.5, 2.0))

    def heal_all(self):
        self.net.heal()
        for n in self.nodes:
            n.resume()
            if not n.check_alive():
                log(f"heal: starting n{n.i} again")
                n.start()


def _names(nodes):
    return ",".join(f"n{n.i}" for n in nodes)


# ---- checks -------------------------------------------------------------------------

def wait_ready(nodes, timeout):
    deadline = time.monotonic() + timeout
    pending = list(nodes)
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not n.ready()]
        if pending:
            time.sleep(0.2)
    return pending


class CpuBurners:
    """Busy loops at normal priority (by default two per core): the overload."""

    def __init__(self, count=None):
        self.count = 2 * (os.cpu_count() or 1) if count is None else count
        self.procs = []

    def start(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []


def partition_halves(net, nodes):
    """A symmetric partition: the first half of the nodes | the rest."""
    ids = [n.i for n in nodes]
    a, b = ids[:len(ids) // 2], ids[len(ids) // 2:]
    log(f"partition {a} | {b}")
    net.partition(a, b)


def all_alive(states, count):
    """True when a node's member states list exactly `count` members, all alive."""
    return {state: v for state, v in states.items() if v} == {"alive": count}


class MembershipWatch(threading.Thread):
    """Polls every node's member states every 0.25 s from start() until
    stop(), and remembers the last poll at which some node listed anything
    but all nodes alive (or could not be read)."""

    # Counters a --keep-dir run records at every poll (timeline.tsv).
    TIMELINE = ('pollen_gossip_sent_by_type_bytes_total{type="sync_ranges"}',
                'pollen_gossip_sent_by_type_bytes_total{type="tree"}',
                "pollen_anti_entropy_runs_total", "pollen_anti_entropy_ranges_repaired_total",
                'pollen_tcp_dropped_frames_total{reason="queue_full"}', "pollen_membership_stalls_total",
                "pollen_tree_resends_total")

    def __init__(self, nodes, timeline=False):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.timeline = [] if timeline else None  # (seconds since start, node, counter values)
        self.started = time.monotonic()
        self.halt = threading.Event()
        self.last_unsettled = None  # time.monotonic() of that poll
        self.polls = 0
        self.errors = 0  # polls that failed with anything but OSError (counted unsettled too)
        self.first_error = None

    def run(self):
        while not self.halt.is_set():
            settled = True
            for n in self.nodes:
                try:
                    text = n.metrics()
                    states = members_by_state(text)
                except OSError:
                    settled = False
                    break
                except Exception as e:  # a torn HTTP reply, ...: never let the watch die silently
                    self.errors += 1
                    self.first_error = self.first_error or repr(e)
                    settled = False
                    break
                if self.timeline is not None:
                    values = dict(re.findall(r"^(pollen_\S+) ([0-9.e+]+)$", text, re.M))
                    self.timeline.append((time.monotonic() - self.started, n.i,
                                          [values.get(c, "") for c in self.TIMELINE]))
                if not all_alive(states, len(self.nodes)):
                    settled = False
                    if self.timeline is None:
                        break  # the other nodes' answers change nothing
            self.polls += 1
            if not settled:
                self.last_unsettled = time.monotonic()
            self.halt.wait(0.25)

    def stop(self):
        self.halt.set()
        self.join()


def wait_members(nodes, timeout):
    """Until every node lists every node alive and none in another state."""
    deadline = time.monotonic() + timeout
    last = {}
    while time.monotonic() < deadline:
        settled = True
        for n in nodes:
            try:
                last[n.i] = members_by_state(n.metrics())
            except OSError as e:
                last[n.i] = str(e)
                settled = False
                continue
            if not all_alive(last[n.i], len(nodes)):
                settled = False
        if settled:
            return None
        time.sleep(0.5)
    return last


def missing_everywhere(nodes, keys):
    """{node id: acknowledged keys it does not report present}."""
    out = {}
    for n in nodes:
        missing = []
        try:
            conn = n.client(timeout=10)
            for off in range(0, len(keys), 1000):
                chunk = keys[off:off + 1000]
                seen = conn.execute_command("BF.MEXISTS", FILTER, *chunk)
                missing.extend(k for k, s in zip(chunk, seen) if s != 1)
            conn.close()
        except (redis.RedisError, OSError) as e:
            missing = [f"<unreachable: {e}>"] + list(keys)
        out[n.i] = missing
    return out


def wait_converged(nodes, keys, timeout, passes=None):
    """None once every key reads present on every node, else what was
    missing at `timeout`. `passes`, if given, gets (start, end, converged,
    {node id: keys missing}) of each check (reading 10^5 keys from every
    node takes a while)."""
    deadline = time.monotonic() + timeout
    while True:
        began = time.monotonic()
        missing = missing_everywhere(nodes, keys)
        done = all(not m for m in missing.values())
        if passes is not None:
            passes.append((began, time.monotonic(), done, {i: len(m) for i, m in missing.items()}))
        if done:
            return None
        if time.monotonic() >= deadline:
            return missing
        time.sleep(0.25 if passes is not None else 1.0)


# ---- main ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pollend", required=True, help="path to the pollend binary")
    ap.add_argument("--seconds", type=float, default=40, help="how long the nemesis runs (default 40)")
    ap.add_argument("--seed", type=int, default=None, help="nemesis and workload seed (default: random)")
    ap.add_argument("--nodes", type=int, default=5, help="cluster size, 2..20 (default 5)")
    ap.add_argument("--writers", type=int, default=2, help="writer threads per node (default 2)")
    ap.add_argument("--rate", type=float, default=5000,
                    help="cluster-wide cap on attempted adds per second (default 5000)")
    ap.add_argument("--converge-timeout", type=float, default=60,
                    help="bound on convergence and membership after the heal, seconds (default 60)")
    ap.add_argument("--keep-dir", action="store_true", help="keep logs, data and each node's final metrics (nN.metrics) even when the run passes")
    ap.add_argument("--nemesis", choices=("random", "heal-under-load"), default="random",
                    help="random faults (default), or one partition under CPU overload, then a measured heal")
    ap.add_argument("--busy-loops", type=int, default=None,
                    help="heal-under-load's overload: this many busy loops (default two per core; 0: none, "
                         "to time the heal itself)")
    args = ap.parse_args()
    if not 2 <= args.nodes <= 20:
        ap.error("--nodes must be 2..20")
    if args.rate <= 0 or args.writers < 1 or args.seconds <= 0:
        ap.error("--rate, --writers and --seconds must be positive")
    if args.busy_loops is not None and not 0 <= args.busy_loops <= 64:
        ap.error("--busy-loops must be 0..64")
    pollend = os.path.abspath(args.pollend)
    if not os.access(pollend, os.X_OK):
        ap.error(f"{pollend} is not an executable")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    replay = (f"sudo /usr/bin/python3 {os.path.abspath(__file__)} --pollend {pollend} --seconds {args.seconds:g} "
              f"--nodes {args.nodes} --writers {args.writers} --rate {args.rate:g} "
              f"--converge-timeout {args.converge_timeout:g} --nemesis {args.nemesis} --seed {seed}"
              + (f" --busy-loops {args.busy_loops}" if args.busy_loops is not None else ""))
    log(f"seed {seed}; replay: {replay}")

    # POLLEN_JEPSEN_REQUIRED=1 (set by .ci/run) turns a skip into a failure.
    cannot = SKIP if os.environ.get("POLLEN_JEPSEN_REQUIRED") != "1" else 1
    if os.geteuid() != 0:
        print("SKIPPED: the Jepsen test needs root to create network namespaces", flush=True)
        return cannot
    probe = f"{NS_PREFIX}probe"
    if run("ip", "netns", "add", probe, check=False).returncode != 0:
        print("SKIPPED: this machine cannot create network namespaces", flush=True)
        return cannot
    run("ip", "netns", "del", probe, check=False)
    if shutil.which("iptables") is None:
        print("FAILED: iptables is missing (bash .ci/deps.sh installs it)", flush=True)
        return 1

    lock = open(LOCK_PATH, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # one run at a time: the names and addresses are fixed

    workdir = tempfile.mkdtemp(prefix="pollen-jepsen-")
    with open(os.path.join(workdir, "jepsen.conf"), "w") as f:
        f.write("appendfsync = always\nanti-entropy-interval = 1s\njoin-timeout = 5s\n"
                "dead-reconnect-interval = 2s\nprobe-interval = 500ms\nprobe-timeout = 300ms\n"
                f"[filter {FILTER}]\ncapacity = 5000000\nfpr = 0.0001\n")
    secret = secrets.token_hex(32)
    net = Network(args.nodes)
    nodes = [Node(i, args.nodes, pollend, workdir, secret) for i in range(1, args.nodes + 1)]
    rng = random.Random(seed)
    failures = []
    burners = CpuBurners(args.busy_loops)

    def cleanup(*_):
        burners.stop()
        for n in nodes:
            n.kill()
        net.teardown()

    signal.signal(signal.SIGTERM, lambda *_: (cleanup(), sys.exit(1)))
    try:
        net.setup()
        for n in nodes:
            n.start()
        not_ready = wait_ready(nodes, 60)
        if not_ready:
            failures.append(f"not ready within 60 s: {_names(not_ready)}")
            raise StopIteration
        settle = wait_members(nodes, 60)
        if settle:
            failures.append(f"membership did not form within 60 s: {settle}")
            raise StopIteration
        log(f"{args.nodes} nodes up and joined; workdir {workdir}")

        stop = threading.Event()
        pause = BATCH * args.nodes * args.writers / args.rate
        writers = [Writer(n, w, stop, rng.randrange(2**63), pause) for n in nodes for w in range(args.writers)]
        for w in writers:
            w.start()
        nemesis = Nemesis(net, nodes, rng)
        if args.nemesis == "heal-under-load":
            burners.start()
            log(f"overload: {len(burners.procs)} busy loops on {os.cpu_count()} cores")
            time.sleep(3)
            partition_halves(net, nodes)
            time.sleep(args.seconds)
            net.heal()
            healed_at = time.monotonic()
            watch = MembershipWatch(nodes, timeline=args.keep_dir)
            watch.start()
            log("healed (the overload goes on); writers stop")
        else:
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                nemesis.step()
            healed_at = None
            nemesis.heal_all()
            log("healed; writers run 2 s more against the healed cluster")
            time.sleep(2)
        stop.set()
        for w in writers:
            w.join(timeout=30)
            if w.is_alive():
                failures.append(f"{w.prefix}: writer still running 30 s after the stop")
        heal_time = healed_at if healed_at is not None else time.monotonic()

        acked = [k for w in writers for k in w.acked]
        log(f"faults: {nemesis.counts}; acknowledged adds {len(acked)}, indeterminate batches "
            f"{sum(w.indeterminate for w in writers)}")
        if len(acked) == 0:
            failures.append("no add was acknowledged: the workload never ran")
        for w in writers:
            for e in w.errors[:5]:
                failures.append(f"{w.prefix}: error reply: {e}")
            for key, at in w.lost[:5]:
                failures.append(f"{w.prefix}: acknowledged key {key} read absent at n{w.node.i} at {at:.1f}s")

        passes = [] if healed_at is not None else None
        sample_passes = []
        if healed_at is not None and acked:
            # Reading every key from every node takes seconds under the
            # overload; a sample of 2,000 reads in a fraction of one, so it
            # times convergence finely. The full check below confirms it.
            sample = rng.sample(acked, min(2000, len(acked)))
            if wait_converged(nodes, sample, args.converge_timeout, sample_passes) is None:
                log(f"a sample of {len(sample)} acknowledged adds present on every node "
                    f"{sample_passes[-1][1] - heal_time:.1f}s after the heal (the last check that found one "
                    f"missing began at {sample_passes[-2][0] - heal_time if len(sample_passes) > 1 else 0.0:.1f}s; "
                    f"checks took {sample_passes[-1][1] - sample_passes[-1][0]:.2f}s)")
        missing = wait_converged(nodes, acked, args.converge_timeout, passes)
        if missing:
            for i, keys in missing.items():
                if keys:
                    failures.append(f"n{i}: {len(keys)} acknowledged adds absent {args.converge_timeout:g}s "
                                    f"after the heal, e.g. {keys[:3]}")
        else:
            log(f"converged: every acknowledged add present on every node "
                f"{time.monotonic() - heal_time:.1f}s after the heal")
            if passes and len(passes) > 1:
                log(f"  (checks took {passes[-1][1] - passes[-1][0]:.1f}s each; the last one that found a key "
                    f"missing began {passes[-2][0] - heal_time:.1f}s after the heal, the first complete one "
                    f"began {passes[-1][0] - heal_time:.1f}s after it)")
        if healed_at is not None:
            # Watched from the heal until it has been settled for 5 s (and for
            # at least 10 s in all), or until --converge-timeout.
            while time.monotonic() - healed_at < args.converge_timeout:
                quiet_since = watch.last_unsettled or healed_at
                if time.monotonic() - quiet_since >= 5.0 and time.monotonic() - healed_at >= 10.0:
                    break
                time.sleep(0.25)
            watch.stop()
            if watch.last_unsettled is None:
                log(f"membership stable: all {args.nodes} alive on every node at every poll from the heal on "
                    f"({watch.polls} polls over {time.monotonic() - healed_at:.1f}s)")
            else:
                settled_for = time.monotonic() - watch.last_unsettled
                log(f"membership stable from {watch.last_unsettled - healed_at:.1f}s after the heal "
                    f"(the last poll where a node listed anything but all {args.nodes} alive), "
                    f"for the {settled_for:.1f}s since")
                if settled_for < 5.0:
                    failures.append(f"membership not stable: unsettled {settled_for:.1f}s before the end of the watch")
            if watch.errors:
                failures.append(f"membership watch: {watch.errors} polls failed unexpectedly, e.g. {watch.first_error}")
        else:
            settle = wait_members(nodes, max(5.0, args.converge_timeout - (time.monotonic() - heal_time)))
            if settle:
                failures.append(f"membership did not settle: {settle}")
            else:
                log(f"membership settled: all {args.nodes} alive on every node")
        if args.keep_dir:  # every node's counters at the end, beside its log
            if healed_at is not None and watch.timeline:
                with open(os.path.join(workdir, "timeline.tsv"), "w") as f:
                    f.write("\t".join(["seconds_after_heal", "node"] + list(MembershipWatch.TIMELINE)) + "\n")
                    for at, i, values in watch.timeline:
                        f.write("\t".join([f"{at:.2f}", f"n{i}"] + values) + "\n")
            if sample_passes:  # which node lacked how much of the sample, check by check
                with open(os.path.join(workdir, "sample.tsv"), "w") as f:
                    f.write("began_after_heal\t" + "\t".join(f"n{n.i}_missing" for n in nodes) + "\n")
                    for began, _, _, missing in sample_passes:
                        f.write(f"{began - heal_time:.2f}\t" + "\t".join(str(missing[n.i]) for n in nodes) + "\n")
            for n in nodes:
                try:
                    with open(os.path.join(workdir, f"n{n.i}.metrics"), "w") as f:
                        f.write(n.metrics())
                except OSError:
                    pass
        for n in nodes:
            n.check_alive()
            for status, at in n.crashes:
                failures.append(f"n{n.i} exited on its own (status {status}) at {at:.1f}s")
    except StopIteration:
        pass
    except Exception:  # a harness step failed (a missing kernel module, ...): report it like any failure
        failures.append("harness error:\n" + traceback.format_exc())
    finally:
        cleanup()

    if failures:
        print("FAILED:", flush=True)
        for f in failures:
            print(f"  {f}")
        for n in nodes:
            with open(n.log_path, errors="replace") as f:
                tail = f.read()[-3000:]
            print(f"---- tail of {n.log_path} ----\n{tail}")
        print(f"logs and data kept in {workdir}\nreplay: {replay}", flush=True)
        return 1
    if not args.keep_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    log("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
