#!/usr/bin/python3
"""Prints COUNT distinct ports (default 1), one per line, each free for both
TCP and UDP on 127.0.0.1 when chosen (gossip binds both on one port). For the
shell tests: `read -r A B C <<< "$(python3 tests/free_ports.py 3 | tr '\\n' ' ')"`.
"""
import socket
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
held = []  # every chosen port stays bound until all are chosen, so they differ
ports = []
for _ in range(100 * count):
    if len(ports) == count:
        break
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("127.0.0.1", 0))
    port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port))
    except OSError:
        t.close()
        u.close()
        continue
    held += [t, u]
    ports.append(port)
for s in held:
    s.close()
if len(ports) != count:
    sys.exit("free_ports.py: no free ports")
print("\n".join(map(str, ports)))
