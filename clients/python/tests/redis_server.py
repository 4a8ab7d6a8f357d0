"""A plain redis-server (Debian's) on a free loopback port, without
persistence: the queue of scrapy-redis-style crawls, and the source SET of
a migration."""
import shutil
import subprocess
import tempfile
import time

import redis

from cluster import free_port


class RedisServer:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="pollen-test-redis-")
        for _ in range(5):  # a free port can be taken before redis-server binds it
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if redis.Redis(port=self.port).ping():
                        self.url = "redis://127.0.0.1:%d" % self.port
                        self.client = redis.Redis(port=self.port)
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
