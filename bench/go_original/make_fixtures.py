#!/usr/bin/env python3
"""Writes the fixtures both sides of bench/go_compare.sh read, for each size: the stored
reported and desired sections and an incoming report, as JSON.

  make_fixtures.py DIR        writes DIR/{10,100,1000}/{reported,desired,report}.json

Leaves are timestamped sensor values grouped ten to a component,
{"c0": {"s0": {"value": 20.0, "ts": "2025-01-22T12:00:00Z"}, ...}, ...}. The report carries
every sensor: the even ones newer than stored (they change), the odd ones older (stale, left
alone). A tenth of the sensors (every tenth, so even ones) have a desired value that the report
acknowledges."""
import json
import os
import sys

STORED, NEWER, OLDER = "2025-01-22T12:00:00Z", "2025-01-22T12:01:00Z", "2025-01-22T11:59:00Z"


def fixture(leaves):
    reported, desired, report = {}, {}, {}
    for i in range(leaves):
        group, leaf = f"c{i // 10}", f"s{i % 10}"
        reported.setdefault(group, {})[leaf] = {"value": 20.0 + i % 7, "ts": STORED}
        if i % 2 == 0:
            report.setdefault(group, {})[leaf] = {"value": 21.0 + i % 7, "ts": NEWER}
        else:
            report.setdefault(group, {})[leaf] = {"value": 19.0 + i % 7, "ts": OLDER}
        if i % 10 == 0:
            desired.setdefault(group, {})[leaf] = {"value": 21.0 + i % 7, "ts": STORED}
    return {"reported": reported, "desired": desired, "report": report}


def main():
    out = sys.argv[1]
    for leaves in (10, 100, 1000):
        os.makedirs(os.path.join(out, str(leaves)), exist_ok=True)
        for name, doc in fixture(leaves).items():
            with open(os.path.join(out, str(leaves), name + ".json"), "w") as f:
                json.dump(doc, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
