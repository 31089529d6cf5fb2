#!/usr/bin/env python3
"""Runs every dashboard panel's query and every alert rule's query against a live
Prometheus that scrapes gamesolver-server, through its HTTP API.

Usage: check-queries.py --prometheus URL --dashboard deploy/grafana/gamesolver.json
                        --rules deploy/prometheus/alerts.yml [--pending NAME ...]
Every query must parse and evaluate. A panel's query must return data; an alert's need
not (it is empty while nothing is wrong), but every series either names must have data.
A series in --pending (one the server does not export yet) only has to parse, and is
reported when it turns up. Prometheus must have loaded the rules and evaluated each
without error. Exits 1 with every problem listed.
"""

import argparse
import json
import re
import sys
import urllib.parse
import urllib.request

import yaml

# Grafana's variables, as the dashboard is opened on the job with every instance.
VARIABLES = {
    "$__rate_interval": "20s",
    "$job": "gamesolver",
    "$instance": ".*",
}
# Every series the server exports starts so; `up` comes from Prometheus.
SERIES = re.compile(r"\b(?:gamesolver|process)_[a-z_]+\b|\bup\b")


def query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as err:
        body = json.load(err)
    if body.get("status") != "success":
        return None, f"{body.get('errorType')}: {body.get('error')}"
    return body["data"]["result"], None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--rules", required=True)
    parser.add_argument("--pending", nargs="*", default=[])
    opts = parser.parse_args()
    base = opts.prometheus.rstrip("/")
    pending = set(opts.pending)
    problems, notes = [], []

    with open(opts.dashboard) as f:
        dashboard = json.load(f)
    panels = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            if "$" in expr:
                problems.append(f"panel {panel['title']!r}: an unknown variable in {expr}")
                continue
            panels.append((f"panel {panel['title']!r} {target['refId']}", expr))
    with open(opts.rules) as f:
        rules = [(f"alert {r['alert']}", r["expr"]) for g in yaml.safe_load(f)["groups"] for r in g["rules"]]

    names = set()
    for what, expr in panels + rules:
        used = set(SERIES.findall(expr))
        names |= used
        result, error = query(base, expr)
        if error:
            problems.append(f"{what}: {error}\n    {expr}")
        elif what.startswith("panel") and not result:
            if used & pending:
                notes.append(f"{what}: no data yet (pending: {', '.join(sorted(used & pending))})")
            else:
                problems.append(f"{what}: no data\n    {expr}")
    for name in sorted(names):
        result, error = query(base, f'count({{__name__=~"{name}(_bucket|_sum|_count)?", job="gamesolver"}})')
        has_data = bool(result)
        if error:
            problems.append(f"series {name}: {error}")
        elif name in pending:
            if has_data:
                notes.append(f"series {name} has data now: take it off the pending list")
        elif not has_data:
            problems.append(f"series {name}: no data")
    for name in sorted(pending - names):
        notes.append(f"pending series {name} is used by no query")

    # The rules as Prometheus loaded and evaluated them.
    with urllib.request.urlopen(f"{base}/api/v1/rules", timeout=10) as response:
        loaded = [r for g in json.load(response)["data"]["groups"] for r in g["rules"]]
    if len(loaded) != len(rules):
        problems.append(f"Prometheus loaded {len(loaded)} rules, the file has {len(rules)}")
    for rule in loaded:
        if rule.get("health") != "ok":
            problems.append(f"rule {rule['name']}: health {rule.get('health')}: {rule.get('lastError')}")
        if rule.get("state") == "firing":
            notes.append(f"rule {rule['name']} is firing")

    for note in notes:
        print(f"check-queries: note: {note}")
    for problem in problems:
        print(f"check-queries: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-queries: ok: {len(panels)} panel queries, {len(rules)} alert queries, "
          f"{len(names)} series ({len(names & pending)} pending), {len(loaded)} rules healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
