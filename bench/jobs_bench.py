#!/usr/bin/env python3
"""Bulk jobs (docs/jobs.md) against /v1/batch/update doing the same writes, on one shadowd with
SQLite (durable commits), in the same run:

1. populate N shadows (reported v=1);
2. batch: C clients send /v1/batch/update requests of 100 desired writes ({"go":1}) until every
   shadow is written once; writes/s;
3. job: one POST /v1/jobs with filter eq(reported/v,1) and desired {"go":2}; targets/s from the
   POST to the job's finish (the selection of the N targets included), and from its answer (the
   writing alone); shadowd's RSS sampled meanwhile, against its RSS before the job;
4. batch again ({"go":3}), to see the machine did not drift.

Usage: bench/jobs_bench.py [--shadows 100000] [--clients 8]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import requests

sys.path.insert(0, os.path.dirname(__file__))
from proc import rss_mb  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
SHADOWD = os.environ.get("SHADOWD", os.path.join(ROOT, "build/default/shadowd"))


def start(data, shadows):
    proc = subprocess.Popen([SHADOWD, "--listen", "127.0.0.1:0", "--store", f"sqlite:{data}/s.db",
                             "--max-job-targets", str(shadows), "--query-budget", str(2 * shadows)],
                            stderr=subprocess.PIPE, text=True)
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("shadowd exited")
        if m := re.search(r"listening address=127\.0\.0\.1:(\d+)", line):
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, f"http://127.0.0.1:{m.group(1)}"


def batches(url, things, section, state, clients):
    """Writes `state` to every thing's `section` with /v1/batch/update, 100 per request, from
    `clients` threads; returns the seconds it took."""
    chunks = [things[i:i + 100] for i in range(0, len(things), 100)]
    lock = threading.Lock()

    def client():
        s = requests.Session()
        while True:
            with lock:
                if not chunks:
                    return
                chunk = chunks.pop()
            ops = [{"thing": t, "section": section, "state": state} for t in chunk]
            r = s.post(url + "/v1/batch/update", data=json.dumps({"operations": ops}), timeout=120)
            assert r.status_code == 200 and '"error"' not in r.text, r.text[:300]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def job(url, pid):
    """Runs one job over every shadow; returns (seconds in all, seconds writing, RSS samples)."""
    samples = []
    t0 = time.perf_counter()
    r = requests.post(url + "/v1/jobs", json={"filter": "eq(reported/v,1)", "desired": {"go": 2}}, timeout=600)
    assert r.status_code == 202, r.text
    t1 = time.perf_counter()
    body = r.json()
    while body["status"] == "running":
        samples.append(rss_mb(pid))
        time.sleep(0.2)
        body = requests.get(url + "/v1/jobs/" + body["id"], timeout=60).json()
    t2 = time.perf_counter()
    assert body["status"] == "succeeded" and body["succeeded"] == body["targets"], body
    return t2 - t0, t2 - t1, body["targets"], samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shadows", type=int, default=100000)
    ap.add_argument("--clients", type=int, default=8)
    a = ap.parse_args()
    data = tempfile.mkdtemp(prefix="jobs-bench-")
    proc, url = start(data, a.shadows)
    try:
        things = [f"bench-{i:07}" for i in range(a.shadows)]
        populate = batches(url, things, "reported", {"v": 1}, a.clients)
        print(f"populated {a.shadows} shadows in {populate:.1f} s")
        before = batches(url, things, "desired", {"go": 1}, a.clients)
        print(f"batch/update: {a.shadows / before:,.0f} writes/s ({before:.1f} s)")
        rss_before = rss_mb(proc.pid)
        total, writing, targets, samples = job(url, proc.pid)
        print(f"job: {targets / total:,.0f} targets/s in all ({total:.1f} s, selection included), "
              f"{targets / writing:,.0f} targets/s writing ({writing:.1f} s)")
        print(f"RSS before the job {rss_before:.1f} MiB, during it at most {max(samples or [rss_before]):.1f} MiB")
        for t in things[:: max(1, len(things) // 100)]:  # the job's writes are there
            shadow = requests.get(f"{url}/v1/things/{t}/shadows/main", timeout=30).json()
            assert shadow["desired"]["state"] == {"go": 2} and shadow["desired"]["version"] == 2, shadow
        after = batches(url, things, "desired", {"go": 3}, a.clients)
        print(f"batch/update again: {a.shadows / after:,.0f} writes/s ({after:.1f} s)")
        batch_rate = a.shadows / ((before + after) / 2)
        print(f"job / batch (mean of both batch runs): {targets / total / batch_rate:.2f} in all, "
              f"{targets / writing / batch_rate:.2f} writing")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
