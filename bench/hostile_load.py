#!/usr/bin/env python3
"""Load test of shadowd under hostile clients, all on loopback and bounded in time.

A well-behaved client (wrk, 32 keep-alive connections, GET of one shadow) is measured alone,
then while attackers hold connections up to the limit and past it, trickle headers, send
endless chunk extensions and finally push shadowd past its descriptor limit. Reports the
client's rate and latency as ratios to the baseline of the same run, how long trickling and
idle connections last against the configured timeouts, shadowd's CPU and RSS.

Usage: bench/hostile_load.py [--shadowd build/default/shadowd] [--seconds 10]
"""
import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import tempfile
import time
import urllib.request

from proc import cpu_seconds, rss_mb

READ_TIMEOUT_MS = 3000
IDLE_TIMEOUT_MS = 20000
MAX_CONNECTIONS = 2000




def wrk(url, seconds):
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    def ms(label):
        value, unit = re.search(rf"{label}%\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rate": rate, "p50_ms": ms("50"), "p99_ms": ms("99"), "non2xx": int(errors.group(1)) if errors else 0}


async def hold(port, n, first_request=False):
    """Opens n connections; with first_request each is served one request and then left idle
    (keep-alive). Returns the streams."""
    conns = []
    for _ in range(n):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            if first_request:
                w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                await r.readuntil(b'{"status":"ok"}')
        except (OSError, asyncio.IncompleteReadError):
            break
        conns.append((r, w))
    return conns


async def lifetime(reader, started):
    """Seconds until the server closes the connection."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    return time.monotonic() - started


async def trickle(port, seconds):
    """Sends a request's headers one byte every 0.5 s after a first request; returns how long
    the server let it go on."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await r.readuntil(b'{"status":"ok"}')
    started = time.monotonic()
    header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 1000 + b"\r\n\r\n"
    for byte in header:
        if r.at_eof() or time.monotonic() - started > seconds:
            break
        try:
            w.write(bytes([byte]))
            await w.drain()
        except ConnectionError:
            break
        await asyncio.sleep(0.5)
    elapsed = await asyncio.wait_for(lifetime(r, started), timeout=seconds)
    w.close()
    return elapsed


async def chunk_flood(port, megabytes):
    """Sends an endless chunk extension; returns the bytes the server took before answering."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /v1/things/t/shadows/main/reported HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;")
    sent = 0
    try:
        while sent < megabytes << 20:
            w.write(b"x" * 65536)
            await w.drain()
            sent += 65536
    except ConnectionError:
        pass
    w.close()
    return sent


async def attack(port, pid, url, seconds, results):
    idle = await hold(port, MAX_CONNECTIONS - 100, first_request=True)
    idle_since = time.monotonic()
    idle_lifetimes = [asyncio.create_task(lifetime(r, idle_since)) for r, _ in idle]
    # 600 more that send nothing: 100 fill the limit (and end at the read timeout), 500 are past
    # it and answered 503 at once.
    over = await hold(port, 600)
    answered = 0
    for r, w in over:
        try:
            if (await asyncio.wait_for(r.read(200), 5)).startswith(b"HTTP/1.1 503"):
                answered += 1
        except (asyncio.TimeoutError, ConnectionError):
            pass
        w.close()
    results["connections_held"] = len(idle)
    results["over_limit_answered_503"] = f"{answered}/{len(over)}"
    await asyncio.sleep(READ_TIMEOUT_MS / 1000 + 1)  # the silent ones inside the limit are closed
    trickles = [asyncio.create_task(trickle(port, 60)) for _ in range(20)]
    floods = [asyncio.create_task(chunk_flood(port, 256)) for _ in range(10)]
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    results["under_attack"] = await asyncio.to_thread(wrk, url, seconds)
    results["cpu_percent_under_attack"] = round(100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0), 1)
    results["flood_bytes_taken_max"] = max(await asyncio.gather(*floods))
    results["trickle_lifetime_s"] = sorted(round(t, 1) for t in await asyncio.gather(*trickles))[::5]
    results["rss_mb_under_attack"] = round(rss_mb(pid), 1)
    lifetimes = await asyncio.gather(*idle_lifetimes)
    results["idle_connection_lifetime_s"] = [round(min(lifetimes), 1), round(max(lifetimes), 1)]
    for _, w in idle:
        w.close()


async def descriptor_exhaustion(port, pid, results):
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    open_now = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_now + 10, hard))
    conns = await hold(port, 300)
    await asyncio.sleep(0.5)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(5)
    results["cpu_percent_at_emfile"] = round(100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0), 1)
    for _, w in conns:
        w.close()
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shadowd", default="build/default/shadowd")
    p.add_argument("--seconds", type=int, default=10)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([args.shadowd, "--listen", "127.0.0.1:0", "--store", f"sqlite:{data}/s.db",
                                   "--read-timeout-ms", str(READ_TIMEOUT_MS), "--idle-timeout-ms", str(IDLE_TIMEOUT_MS),
                                   "--max-connections", str(MAX_CONNECTIONS)],
                                  stderr=subprocess.PIPE, text=True)
        try:
            port = None
            while port is None:
                line = server.stderr.readline()
                if not line:
                    raise SystemExit("shadowd exited")
                m = re.search(r"listening address=127\.0\.0\.1:(\d+)", line)
                port = int(m.group(1)) if m else None
            base = f"http://127.0.0.1:{port}"
            url = base + "/v1/things/bench/shadows/main"
            urllib.request.urlopen(urllib.request.Request(url + "/reported", data=b'{"state":{"a":1}}', method="POST"))
            results = {"read_timeout_s": READ_TIMEOUT_MS / 1000, "idle_timeout_s": IDLE_TIMEOUT_MS / 1000,
                       "max_connections": MAX_CONNECTIONS, "rss_mb_before": round(rss_mb(server.pid), 1)}
            results["baseline"] = wrk(url, args.seconds)
            asyncio.run(attack(port, server.pid, url, args.seconds, results))
            asyncio.run(descriptor_exhaustion(port, server.pid, results))
            time.sleep(1)
            results["after"] = wrk(url, args.seconds)
            results["rate_ratio_under_attack"] = round(results["under_attack"]["rate"] / results["baseline"]["rate"], 2)
            results["p99_ratio_under_attack"] = round(results["under_attack"]["p99_ms"] / results["baseline"]["p99_ms"], 2)
            results["rate_ratio_after"] = round(results["after"]["rate"] / results["baseline"]["rate"], 2)
            results["rss_mb_after"] = round(rss_mb(server.pid), 1)
            metrics = urllib.request.urlopen(base + "/metrics").read().decode()
            results["metrics"] = dict(re.findall(r"^(shadowd_http_(?:connections|accept|requests_rejected|responses_shed)\w*) (\d+)",
                                                 metrics, re.M))
            print(json.dumps(results, indent=2))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
