// A pollend cluster on loopback for the tests: real processes on free ports,
// one shared secret (as clients/python/tests/cluster.py). POLLEND names the
// binary; by default the build tree's, build/node/runtime/pollend.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function pollendPath() {
  const p = process.env.POLLEND || path.resolve(HERE, '../../../build/node/runtime/pollend');
  try {
    fs.accessSync(p, fs.constants.X_OK);
  } catch {
    throw new Error(`no pollend binary at ${p}: build it, or set POLLEND`);
  }
  return p;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function httpGet(port, urlPath, timeoutMs = 2000) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve(res.statusCode === 200 ? body : null));
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

const running = new Set(); // every child, killed if this process exits first
process.on('exit', () => {
  for (const p of running) {
    try { p.kill('SIGKILL'); } catch { /* gone */ }
  }
});

export async function waitFor(ready, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await ready()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export class Cluster {
  constructor() {
    this.binary = pollendPath();
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pollen-node-test-'));
    this.secret = crypto.randomBytes(32).toString('hex');
    this.procs = [];
    this.respPorts = [];
    this.httpPorts = [];
  }

  /** Starts n nodes joined through the first, and waits until each sees all alive. */
  static async start(n = 3) {
    const c = new Cluster();
    try {
      let seed = null;
      for (let i = 0; i < n; i++) {
        const { proc, gossip, resp, httpPort } = await c._start(i, seed);
        seed = seed || `127.0.0.1:${gossip}`;
        c.procs.push(proc);
        c.respPorts.push(resp);
        c.httpPorts.push(httpPort);
      }
      for (let i = 0; i < n; i++) {
        await waitFor(async () => (await c.aliveMembers(i)) === n, `node ${i + 1} to see ${n} alive members`);
      }
    } catch (e) {
      const logs = c.procs.map((p, i) => `n${i + 1} (${p.exitCode === null ? 'running' : `exited ${p.exitCode}`}):\n${c.log(i).slice(-2000)}`);
      await c.close();
      throw new Error(`${e.message}\n${logs.join('\n')}`);
    }
    return c;
  }

  async _start(i, seed, attempts = 5) {
    // A port found free can be taken before pollend binds it: start again on others.
    const logPath = path.join(this.dir, `n${i + 1}.log`);
    let last;
    for (let a = 0; a < attempts; a++) {
      const [gossip, resp, httpPort] = [await freePort(), await freePort(), await freePort()];
      const args = ['--node-name', `n${i + 1}`, '--gossip-bind', `127.0.0.1:${gossip}`,
        '--resp-bind', `127.0.0.1:${resp}`, '--http-bind', `127.0.0.1:${httpPort}`, '--log-level', 'warn'];
      if (seed) args.push('--seeds', seed);
      const log = fs.openSync(logPath, 'w');
      const proc = spawn(this.binary, args, {
        env: { ...process.env, POLLEN_SECRET: this.secret },
        stdio: ['ignore', log, log],
      });
      fs.closeSync(log);
      running.add(proc);
      proc.on('exit', () => running.delete(proc));
      last = { proc, gossip, resp, httpPort };
      // Listening (the HTTP port is bound last) or exited, whichever first.
      const deadline = Date.now() + 30000;
      while (proc.exitCode === null && proc.signalCode === null && Date.now() < deadline &&
             (await httpGet(httpPort, '/metrics')) === null) {
        await sleep(50);
      }
      if (proc.exitCode === null && proc.signalCode === null) return last;
      if (!fs.readFileSync(logPath, 'utf8').includes('Address already in use')) return last;
    }
    return last;
  }

  get urls() {
    return this.respPorts.map((p) => `redis://127.0.0.1:${p}`);
  }

  async aliveMembers(i) {
    const body = await httpGet(this.httpPorts[i], '/metrics');
    if (body === null) return 0;
    for (const line of body.split('\n')) {
      if (line.startsWith('pollen_members{state="alive"}')) return Math.floor(Number(line.split(/\s+/)[1]));
    }
    return 0;
  }

  /** SIGKILLs node i and waits for it to be gone. */
  async kill(i) {
    const p = this.procs[i];
    if (p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((resolve) => p.once('exit', resolve));
    p.kill('SIGKILL');
    await gone;
  }

  /**
   * SIGSTOP / SIGCONT node i: it keeps its connections and answers nothing.
   * pause waits until it is stopped (the signal takes effect after kill returns).
   */
  async pause(i) {
    const p = this.procs[i];
    p.kill('SIGSTOP');
    await waitFor(() => {
      try {
        // /proc/PID/stat: "pid (comm) STATE ...": T once stopped.
        const stat = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8');
        return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
      } catch {
        return true; // no /proc: nothing better to wait on
      }
    }, `node ${i + 1} to stop`, 5000);
  }

  resume(i) { this.procs[i].kill('SIGCONT'); }

  log(i) {
    try {
      return fs.readFileSync(path.join(this.dir, `n${i + 1}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  async close() {
    for (let i = 0; i < this.procs.length; i++) {
      try { this.procs[i].kill('SIGCONT'); } catch { /* gone */ }
      await this.kill(i);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
