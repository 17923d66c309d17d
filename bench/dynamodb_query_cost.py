#!/usr/bin/env python3
"""What a fleet query costs on DynamoDB (docs/queries.md, "Indexes"): requests and items read,
counted by a proxy between shadowd and DynamoDB Local, for the same query on a small and a
ten times larger fleet, through a declared index and through a scan (allowScan).

Each fleet holds SELECTED shadows reporting fw "9.9" and the rest other versions, so the query
`eq(reported/fw,"9.9")` selects the same shadows in both: through the index its cost should stay
the same while the fleet grows; through a scan it grows with the fleet.

A second query narrows a value half the fleet holds (`zone` "a") to ten things by a thing prefix:
`and(like(thing,"dev-00001*"),eq(reported/zone,"a"))` reads the index only within those things, so
its cost too should stay the same while the fleet grows.

Items read: the Count of each Query and Scan answer (items its key condition matched, before
any filter) plus the items each BatchGetItem returned.

Usage: scripts/with-services.sh bench/dynamodb_query_cost.py [--fleet 500] [--selected 50]
"""
import argparse
import http.client
import http.server
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(__file__))
from sse_bench import dynamodb_table, start  # noqa: E402

import requests  # noqa: E402


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.requests, self.items = {}, 0

    def add(self, operation, response):
        with self.lock:
            self.requests[operation] = self.requests.get(operation, 0) + 1
            if operation in ("Query", "Scan"):
                self.items += response.get("ScannedCount", response.get("Count", 0))
            elif operation == "BatchGetItem":
                self.items += sum(len(v) for v in response.get("Responses", {}).values())

    def snapshot(self):
        with self.lock:
            return dict(self.requests), self.items


def proxy(target, counter):
    """An HTTP proxy to DynamoDB Local that counts what passes; returns its port."""
    host, port = target.split("//")[1].split(":")
    local = threading.local()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
            for attempt in (1, 2):  # a kept connection DynamoDB Local closed: once more on a new one
                try:
                    if not hasattr(local, "conn"):
                        local.conn = http.client.HTTPConnection(host, int(port), timeout=30)
                    local.conn.request("POST", self.path, body, headers)
                    r = local.conn.getresponse()
                    data = r.read()
                    break
                except (OSError, http.client.HTTPException):
                    local.conn.close()
                    del local.conn
                    if attempt == 2:
                        raise
            operation = self.headers.get("X-Amz-Target", "").split(".")[-1]
            if r.status == 200:
                counter.add(operation, json.loads(data))
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def measure(base, counter, fleet, selected):
    session = requests.Session()

    def report(i):
        fw = "9.9" if i < selected else "1.%d" % (i % 9)
        state = {"fw": fw, "zone": "a" if i % 2 == 0 else "b"}
        r = requests.post(f"{base}/v1/things/dev-{i:06d}/shadows/main/reported", json={"state": state})
        assert r.status_code == 200, r.text

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(report, range(fleet)))
    r = session.put(f"{base}/v1/index", json={"fields": ["reported/fw", "reported/zone"]})
    assert r.status_code == 200, r.text
    start = time.time()
    while any(f["state"] != "ready" for f in session.get(f"{base}/v1/index").json()["fields"]):
        assert time.time() - start < 300, "the build did not end"
        time.sleep(0.5)
    print(f"fleet {fleet}: written and indexed", file=sys.stderr, flush=True)
    out = {}
    query = 'eq(reported/fw,"9.9")'
    zone = 'and(like(thing,"dev-00001*"),eq(reported/zone,"a"))'
    for label, path, params, expected in [
            ("count, index", "/v1/shadows/count", {"filter": query}, selected),
            ("page of 100, index", "/v1/shadows", {"filter": query, "limit": 100}, min(selected, 100)),
            ("zone a in 10 things", "/v1/shadows", {"filter": zone, "limit": 100}, 5),
            ("count, scan", "/v1/shadows/count", {"filter": query, "allowScan": "true"}, selected)]:
        if "scan" in label:
            session.put(f"{base}/v1/index", json={"fields": []})
        counter.reset()
        r = session.get(base + path, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        found = body["count"] if "count" in body else len(body["shadows"])
        assert found == expected, (label, found)
        out[label] = counter.snapshot()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", type=int, default=500)
    parser.add_argument("--selected", type=int, default=50)
    args = parser.parse_args()
    endpoint = os.environ.get("DS_DYNAMODB_ENDPOINT")
    if not endpoint:
        sys.exit("run through scripts/with-services.sh (DynamoDB Local)")
    counter = Counter()
    port = proxy(endpoint, counter)
    results = {}
    for fleet in (args.fleet, args.fleet * 10):
        table, drop = dynamodb_table(endpoint)
        proc, http_port = start(None, ["--store", f"dynamodb:{table}", "--dynamodb-endpoint", f"http://127.0.0.1:{port}"])
        try:
            results[fleet] = measure(f"http://127.0.0.1:{http_port}", counter, fleet, args.selected)
        finally:
            proc.terminate()
            proc.wait()
            drop()
    print(f"query eq(reported/fw,\"9.9\"), {args.selected} shadows selected")
    print(f"{'':22}" + "".join(f"{'fleet ' + str(f):>34}" for f in results))
    for label in next(iter(results.values())):
        cells = []
        for fleet, r in results.items():
            requests_by_op, items = r[label]
            cells.append(f"{sum(requests_by_op.values()):5} requests, {items:6} items read")
        print(f"{label:22}" + "".join(f"{c:>34}" for c in cells))


if __name__ == "__main__":
    main()
