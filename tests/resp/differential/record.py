#!/usr/bin/env python3
"""Record the expected replies of the differential table from the anchor.

The anchor is a real redis-server 7.0 with the RedisBloom 2.4 module loaded, e.g.

  redis-server --port 27001 --bind 127.0.0.1 --save '' --appendonly no \\
      --loadmodule /path/to/redisbloom.so --daemonize yes

For each case file (default: every *.cases next to this script), on one connection:
FLUSHALL, then the file's '@anchor-setup' commands, then every '> ' command in order.
The expected reply of each case is rewritten in place from the anchor's reply; comments,
blank lines and directives are kept, and a '...' line stays '...' where the anchor's
reply has a value at that position. Cases written without a reply are filled in.

  record.py --anchor-port 27001 [--check] [files...]

--check writes nothing and exits 1 if any reply would change.
"""

import argparse
import glob
import os
import sys

sys.dont_write_bytecode = True   # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resptable as rt  # noqa: E402


def record_file(path, host, port, check):
    cf = rt.load_case_file(path, allow_unrecorded=True)
    conn = rt.Connection(host, port)
    changed = 0
    try:
        reply = conn.call([b"FLUSHALL"])
        if reply.kind != "+":
            raise SystemExit("%s: FLUSHALL failed: %s" % (path, rt.render_lines(reply)))
        for args in cf.anchor_setup:
            reply = conn.call(args)
            if reply.kind in "-!":
                raise SystemExit("%s: @anchor-setup %r failed: %s"
                                 % (path, args, rt.render_lines(reply)))
        for case in cf.cases:
            actual = conn.call(case.args)
            new = rt.merge_wildcards(case.expected, actual)
            new_text = rt.render_lines(new)
            if new_text != case.expected_text:
                changed += 1
                if check:
                    print("%s:%d: > %s" % (path, case.line_no, case.command))
                    print("  table:  " + " | ".join(case.expected_text))
                    print("  anchor: " + " | ".join(new_text))
                case.expected = new
                case.expected_text = new_text
    finally:
        conn.close()
    if changed and not check:
        tmp = path + ".tmp"
        with open(tmp, "w", newline="\n") as f:
            f.write(cf.to_text())
        os.replace(tmp, path)
    return len(cf.cases), changed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--anchor-port", type=int, required=True)
    ap.add_argument("--anchor-host", default="127.0.0.1")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a recorded reply differs from the anchor")
    ap.add_argument("files", nargs="*")
    opts = ap.parse_args()
    files = opts.files or sorted(glob.glob(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "*.cases")))
    if not files:
        raise SystemExit("no case files")
    total = total_changed = 0
    for path in files:
        try:
            n, changed = record_file(path, opts.anchor_host, opts.anchor_port, opts.check)
        except rt.FormatError as e:
            raise SystemExit("format error: %s" % e)
        except rt.ConnectionLost as e:
            raise SystemExit("%s: lost the anchor: %s" % (path, e))
        total += n
        total_changed += changed
        print("%s: %d cases, %d %s" % (os.path.basename(path), n, changed,
                                        "differ" if opts.check else "updated"))
    print("%d cases, %d %s" % (total, total_changed, "differ" if opts.check else "updated"))
    return 1 if (opts.check and total_changed) else 0


if __name__ == "__main__":
    sys.exit(main())
