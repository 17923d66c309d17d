#!/usr/bin/env python3
"""Writes one fuzz seed per table-driven test case: a flag byte, then
[stored reported, stored desired, incoming state] as JSON."""
import json
import pathlib
import sys

cases_dir, out_dir = map(pathlib.Path, sys.argv[1:3])
out_dir.mkdir(parents=True, exist_ok=True)
count = 0
for path in sorted(cases_dir.glob("*.json")):
    for i, case in enumerate(json.loads(path.read_text())):
        flags = (1 if case.get("write") == "desired" else 0) \
            | (2 if case.get("mode") == "client_is_master" else 0) \
            | (4 if case.get("acknowledge") is False else 0)
        body = json.dumps([case.get("reported", {}), case.get("desired", {}), case["state"]])
        (out_dir / f"{path.stem}-{i:03d}").write_bytes(bytes([flags]) + body.encode())
        count += 1
print(f"seed corpus: {count} inputs in {out_dir}")
