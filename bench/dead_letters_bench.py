#!/usr/bin/env python3
"""Dead letters through shadowd's API on durable SQLite (docs/benchmarks.md, "Dead letters").

1. Deleting many: N dead letters of small events are written straight into the database of a
   stopped shadowd (a disabled registration's), then shadowd is started and
   DELETE /v1/registrations/{id}/dead-letters is timed.
2. A page of big events: M dead letters of EVENT_BYTES each; the bytes of one
   GET …/dead-letters?limit=1000 and the peak RSS of shadowd while it answers.

Usage: bench/dead_letters_bench.py [--shadowd build/default/shadowd] [--letters 20000]
                                   [--big 150] [--event-bytes 245760] [--rounds 3]
"""
import argparse
import json
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
import urllib.request

from proc import status_mb




class Shadowd:
    def __init__(self, binary, data, *args):
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--store", f"sqlite:{data}/shadows.db",
                                      "--durability", "full", *args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        for line in self.proc.stderr:
            m = re.search(r"listening address=127\.0\.0\.1:(\d+)", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                return
        raise RuntimeError("shadowd did not start")

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def fill(db, registration, count, event_bytes):
    """Writes `count` dead letters of events of about `event_bytes` bytes (shadowd stopped)."""
    con = sqlite3.connect(db)
    pad = "x" * max(0, event_bytes - 200)
    rows = []
    for i in range(count):
        event_id = "%020d#R%d" % (1_700_000_000_000_000_000 + i, i + 1)
        event = json.dumps({"specversion": "1.0", "id": event_id, "source": "deviceshadow",
                            "type": "deviceshadow.shadow.updated", "subject": f"t{i}#main",
                            "data": {"thing": f"t{i}", "name": "main", "pad": pad}})
        rows.append((registration, event_id, event, 10, "webhook: HTTP 503", 1_700_000_000_000_000_000 + i))
    with con:
        con.executemany("INSERT INTO dead_letters(registration, event_id, event, attempts, last_error, failed) "
                        "VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shadowd", default="build/default/shadowd")
    p.add_argument("--letters", type=int, default=20000)
    p.add_argument("--big", type=int, default=150)
    p.add_argument("--event-bytes", type=int, default=240 * 1024)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    registration = {"target": {"type": "webhook", "url": "http://127.0.0.1:9/"}, "enabled": False}

    for round_ in range(a.rounds):
        data = tempfile.mkdtemp(prefix="dl-bench-")
        try:
            s = Shadowd(a.shadowd, data)
            s.call("PUT", "/v1/registrations/r", registration)
            s.stop()
            fill(f"{data}/shadows.db", "r", a.letters, 300)
            s = Shadowd(a.shadowd, data)
            started = time.perf_counter()
            deleted = json.loads(s.call("DELETE", "/v1/registrations/r/dead-letters"))["deleted"]
            seconds = time.perf_counter() - started
            s.stop()
            print(f"round {round_ + 1}: deleted {deleted} dead letters in {seconds:.3f} s")
        finally:
            shutil.rmtree(data, ignore_errors=True)

    data = tempfile.mkdtemp(prefix="dl-bench-")
    try:
        s = Shadowd(a.shadowd, data)
        s.call("PUT", "/v1/registrations/r", registration)
        s.stop()
        fill(f"{data}/shadows.db", "r", a.big, a.event_bytes)
        s = Shadowd(a.shadowd, data)
        before = status_mb(s.proc.pid, "VmHWM")
        started = time.perf_counter()
        body = s.call("GET", "/v1/registrations/r/dead-letters?limit=1000")
        seconds = time.perf_counter() - started
        page = json.loads(body)
        print(f"page of {a.big} letters of {a.event_bytes} bytes: {len(body)} bytes, "
              f"{len(page['deadLetters'])} letters, cursor {'yes' if 'cursor' in page else 'no'}, {seconds:.3f} s, "
              f"peak RSS {before:.1f} -> {status_mb(s.proc.pid, 'VmHWM'):.1f} MiB")
        s.stop()
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
