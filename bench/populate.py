#!/usr/bin/env python3
"""Creates N shadows (pop-0 … pop-N-1) through /v1/batch/update, 100 per request, 8 in parallel."""
import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

url, count = sys.argv[1], int(sys.argv[2])


def batch(start):
    ops = [{"thing": f"pop-{i}", "section": "reported",
            "state": {"temp": {"value": 20.5, "ts": 1700000000000 + i}, "fw": "1.2.3", "on": True}}
           for i in range(start, min(start + 100, count))]
    req = urllib.request.Request(url + "/v1/batch/update", data=json.dumps({"operations": ops}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200


with ThreadPoolExecutor(8) as pool:
    list(pool.map(batch, range(0, count, 100)))
print(f"populated {count} shadows")
