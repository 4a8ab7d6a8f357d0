#!/usr/bin/env python3
"""ops/grafana/pollen.json is a well-formed Grafana dashboard whose every query
parses as PromQL (promtool check rules, each query as a recording rule).
That the pollen_ metrics it names exist in a live pollend's /metrics is
checked by runtime_hostile_test (MetricsPassPromtoolAndHealthEndpointsAnswer)."""
import json
import os
import re
import subprocess
import sys
import tempfile

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "grafana", "pollen.json")
# Grafana's variables, as they would be substituted before Prometheus sees the query.
SUBSTITUTIONS = {"$__rate_interval": "5m", "$instance": ".*", "$filter": ".*"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in dash:
            fail(f"dashboard has no '{key}'")
    variables = {v["name"] for v in dash["templating"]["list"]}
    if variables != {"datasource", "instance", "filter"}:
        fail(f"variables {sorted(variables)}")
    queries = [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    ids, cells, exprs = set(), set(), []
    for p in dash["panels"]:
        if p["id"] in ids:
            fail(f"duplicate panel id {p['id']}")
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24 or g["h"] <= 0:
            fail(f"panel '{p['title']}' is off the 24-column grid: {g}")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    fail(f"panel '{p['title']}' overlaps another at ({x}, {y})")
                cells.add((x, y))
        if p["type"] == "row":
            continue
        if not p.get("title") or p["datasource"]["uid"] != "${datasource}":
            fail(f"panel {p['id']}: needs a title and the ${{datasource}} variable")
        if not p.get("targets"):
            fail(f"panel '{p['title']}' has no queries")
        if len({t["refId"] for t in p["targets"]}) != len(p["targets"]):
            fail(f"panel '{p['title']}' repeats a refId")
        for t in p["targets"]:
            if "pollen_" not in t["expr"]:
                fail(f"panel '{p['title']}': query names no pollen_ metric: {t['expr']}")
            exprs.append((p["title"], t["expr"]))
    if len(exprs) < 20:
        fail(f"only {len(exprs)} queries")
    # Every query, variables substituted, must parse: as recording rules.
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, (title, expr) in enumerate(exprs + [("variable", q) for q in queries]):
        m = re.match(r"label_values\((.*), *[a-z_]+\)$", expr)
        if m:
            expr = m.group(1)  # Grafana's helper; its metric must parse
        for k, v in SUBSTITUTIONS.items():
            expr = expr.replace(k, v)
        if "$" in expr:
            fail(f"panel '{title}': unknown variable in {expr}")
        rules.append(f"      - record: dashboard:query_{i}")
        rules.append("        expr: " + json.dumps(expr))
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("\n".join(rules) + "\n")
        path = f.name
    try:
        r = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        fail("a query does not parse:\n" + r.stdout + r.stderr)
    print(f"ok: {len(dash['panels'])} panels, {len(exprs)} queries parse")


if __name__ == "__main__":
    main()
