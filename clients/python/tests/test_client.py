"""pollen.client.SeenSet against a real 3-node cluster: answers, batching,
WAIT, failover (trusted before sending, "not seen" after), no node left."""
import os
import sys
import unittest

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pollen import NoNodeAvailable, SeenSet  # noqa: E402
from cluster import Cluster, free_port  # noqa: E402


class SeenSetTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster(3)

    def tearDown(self):
        self.cluster.stop()

    def test_answers_per_key_in_batches_and_waits_for_replicas(self):
        # A generous WAIT timeout: a WAIT cut short by a loaded machine is not what is tested.
        s = SeenSet(self.cluster.urls, "urls", batch_size=3, wait_replicas=2, wait_timeout_ms=20000)
        s.reserve(0.001, 100000)
        s.reserve(0.001, 100000)  # exists: left as it is
        keys = ["k%d" % i for i in range(10)]
        self.assertEqual(s.seen_add(keys), [False] * 10)
        self.assertEqual(s.seen_add(keys + ["new"]), [True] * 10 + [False])
        self.assertEqual(s.seen(["k0", "never"]), [True, False])
        self.assertEqual(s.short_waits, 0)
        # WAIT 2 returned: both other nodes hold every key now, gossip or not.
        for port in self.cluster.resp_ports[1:]:
            r = redis.Redis(port=port)
            self.assertEqual(r.execute_command("BF.MEXISTS", "urls", *keys), [1] * 10)
        with self.assertRaises(redis.ResponseError):
            SeenSet(self.cluster.urls, "bad").reserve(2.0, 100)  # RedisBloom's range error

    def test_a_node_that_refuses_is_skipped_and_its_answers_trusted(self):
        dead = "redis://127.0.0.1:%d" % free_port()  # nobody listens
        s = SeenSet([dead] + self.cluster.urls, "f")
        self.assertEqual(s.seen_add(["a", "b"]), [False, False])
        self.assertEqual(s.seen_add(["a"]), [True])
        self.assertEqual(s.failovers, 1)
        self.assertEqual(s.unvouched, 0)
        self.assertEqual(s.node, self.cluster.urls[0])

    def test_a_node_killed_between_calls_loses_nothing_with_wait(self):
        # WAIT 2: both other nodes hold every key, whichever the client moves
        # to (with WAIT 1 the one holding them may be the other one, and the
        # node moved to answers "new" until gossip brings them: a duplicate,
        # not a loss).
        s = SeenSet(self.cluster.urls, "f", wait_replicas=2, wait_timeout_ms=20000)  # as above
        keys = ["url-%d" % i for i in range(50)]
        self.assertEqual(s.seen_add(keys), [False] * 50)
        self.cluster.kill(0)  # the node in use, its connection idle
        self.assertEqual(s.seen_add(keys + ["fresh"]), [True] * 50 + [False])
        self.assertEqual(s.failovers, 1)
        self.assertEqual(s.unvouched, 0)  # the request was never sent to the dead node
        self.assertEqual(s.node, self.cluster.urls[1])
        self.assertEqual(s.short_waits, 1)  # after the kill one peer is left for WAIT 2

    def test_no_node_left_raises(self):
        s = SeenSet(self.cluster.urls, "f")
        for i in range(3):
            self.cluster.kill(i)
        with self.assertRaises(NoNodeAvailable):
            s.seen_add(["x"])

    def test_arguments_are_checked(self):
        with self.assertRaises(ValueError):
            SeenSet([], "f")
        with self.assertRaises(ValueError):
            SeenSet(self.cluster.urls, "f", batch_size=0)


if __name__ == "__main__":
    unittest.main()
