#!/usr/bin/env python3
"""Live change streams (docs/streams.md) on one shadowd with SQLite (durable commits), or with
--dynamodb ENDPOINT on two shadowd sharing one DynamoDB table (a new one, dropped after), where
the writes go to both in turn and the streams are opened on both in turn, so half the messages
cross from one shadowd to the other (history's time index, polled):

1. latency: S streams open, each following one of S shadows; writers report round-robin over the
   shadows at R writes/s for T seconds. Each message's latency is its arrival time minus the
   write's timestamp (in its id, taken before the commit): from the write's start, so an upper
   bound of the acknowledged-write-to-message latency. Prints p50, p99, max and the rate reached.
2. idle streams: RSS of shadowd before and after opening N idle streams, per stream.
3. fan-out (--fanout N, SQLite): the durable report rate (wrk, 2 threads, 32 connections, 10,000
   shadows) with no stream open, then with N `/v1/events` streams open, each receiving every
   write, drained by one reader that counts messages and overflows without parsing them.

Usage: bench/sse_bench.py [--streams 100] [--rate 1000] [--seconds 10] [--idle 2000] [--dynamodb URL]
       bench/sse_bench.py --fanout 1000 [--seconds 10]
"""
import argparse
import http.client
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from proc import cpu_seconds, rss_mb  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
SHADOWD = os.environ.get("SHADOWD", os.path.join(ROOT, "build/default/shadowd"))


def start(data, store_args=None):
    store_args = store_args or ["--store", f"sqlite:{data}/s.db"]
    proc = subprocess.Popen([SHADOWD, "--listen", "127.0.0.1:0", *store_args,
                             "--max-streams", "100000", "--max-connections", "100000"],
                            stderr=subprocess.PIPE, text=True)
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("shadowd exited")
        if m := re.search(r"listening address=127\.0\.0\.1:(\d+)", line):
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(m.group(1))


def open_stream(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    s.setblocking(False)
    return s


def dynamodb_table(endpoint):
    """A table in shadowd's layout without a stream (DynamoDB Local slows down with one)."""
    import boto3
    import uuid
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="local", aws_secret_access_key="local")
    name = "bench-" + uuid.uuid4().hex[:8]
    index = lambda n, attrs: {"IndexName": n, "KeySchema": [{"AttributeName": n + "PK", "KeyType": "HASH"},
                                                            {"AttributeName": n + "SK", "KeyType": "RANGE"}],
                              "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": attrs}}
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"}
                                           for a in ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK")],
                     KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                     GlobalSecondaryIndexes=[index("GSI1", ["liveCount"]), index("GSI2", ["timestamp", "expires", "event"])])
    return name, lambda: ddb.delete_table(TableName=name)


def latency(ports, streams, rate, seconds):
    """`ports`: the shadowd to write to and open streams on, in turn."""
    socks = [open_stream(ports[i % len(ports)], f"/v1/things/sse-{i}/shadows/main/events") for i in range(streams)]
    latencies, stop = [], threading.Event()
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    id_line = re.compile(rb"\nid: (\d{20})#")

    def read():
        while not stop.is_set():
            for key, _ in sel.select(0.2):
                data = key.fileobj.recv(1 << 16)
                now = time.time_ns()
                latencies.extend(now - int(m.group(1)) for m in id_line.finditer(data))

    reader = threading.Thread(target=read)
    reader.start()
    writers, done = 8, [0] * 8
    end = time.time() + seconds

    def write(w):
        conn = http.client.HTTPConnection("127.0.0.1", ports[w % len(ports)])
        n, start = w, time.time()
        while time.time() < end:
            due = start + (n // writers) * writers / rate
            if (pause := due - time.time()) > 0:
                time.sleep(pause)
            conn.request("POST", f"/v1/things/sse-{n % streams}/shadows/main/reported",
                         body=json.dumps({"state": {"n": n}}), headers={"Content-Type": "application/json"})
            conn.getresponse().read()
            n += writers
            done[w] += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(3 if len(ports) > 1 else 1)
    stop.set()
    reader.join()
    for s in socks:
        s.close()
    latencies.sort()
    ms = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6
    print(f"latency: {streams} streams, {sum(done) / seconds:.0f} writes/s reached ({rate} asked), "
          f"{len(latencies)} messages: p50 {ms(0.5):.1f} ms, p99 {ms(0.99):.1f} ms, max {latencies[-1] / 1e6:.1f} ms")


def idle(proc, port, count):
    before = rss_mb(proc.pid)
    socks = [open_stream(port, "/v1/events" if i % 2 else f"/v1/things/idle-{i}/shadows/main/events") for i in range(count)]
    time.sleep(1)
    after = rss_mb(proc.pid)
    print(f"idle: {count} streams, RSS {before:.1f} -> {after:.1f} MiB: {(after - before) * 1024 / count:.1f} KiB per stream")
    for s in socks:
        s.close()


def report_rate(port, seconds):
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", os.path.join(ROOT, "bench/wrk_report.lua"),
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def fanout(proc, port, count, seconds):
    alone = report_rate(port, seconds)
    socks = [open_stream(port, "/v1/events") for _ in range(count)]
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    counts, stop = {"messages": 0, "overflows": 0, "closed": 0, "bytes": 0}, threading.Event()

    def read():
        while not stop.is_set():
            for key, _ in sel.select(0.2):
                data = key.fileobj.recv(1 << 20)
                if not data:
                    sel.unregister(key.fileobj)
                    counts["closed"] += 1
                    continue
                counts["bytes"] += len(data)
                counts["messages"] += data.count(b"\nevent: change")
                counts["overflows"] += data.count(b"event: overflow")

    reader = threading.Thread(target=read)
    reader.start()
    cpu = cpu_seconds(proc.pid)
    with_streams = report_rate(port, seconds)
    cpu = cpu_seconds(proc.pid) - cpu
    time.sleep(2)
    stop.set()
    reader.join()
    for s in socks:
        s.close()
    print(f"fan-out: {alone:.0f} reports/s with no stream, {with_streams:.0f}/s with {count} streams each receiving "
          f"every write: {with_streams / alone:.2f}; {counts['messages']} messages ({counts['bytes'] / 2**20:.0f} MiB) read, "
          f"{counts['overflows']} overflows, {counts['closed']} streams closed; shadowd CPU {cpu:.1f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--dynamodb", default="", help="a DynamoDB (Local) endpoint: two shadowd on a new table there")
    p.add_argument("--fanout", type=int, default=0, help="N streams receiving every write, against none (SQLite)")
    a = p.parse_args()
    data = tempfile.mkdtemp()
    procs, drop = [], None
    try:
        if a.dynamodb:
            table, drop = dynamodb_table(a.dynamodb)
            env = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
            os.environ.update({k: os.environ.get(k, v) for k, v in env.items()})
            procs = [start(data, ["--store", f"dynamodb:{table}", "--dynamodb-endpoint", a.dynamodb,
                                  "--region", "us-east-1"]) for _ in range(2)]
        else:
            procs = [start(data)]
        if a.fanout:
            fanout(*procs[0], a.fanout, a.seconds)
            return
        latency([port for _, port in procs], a.streams, a.rate, a.seconds)
        if a.idle:
            idle(*procs[0], a.idle)
    finally:
        for proc, _ in procs:
            proc.terminate()
            proc.wait()
        if drop:
            drop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
