#!/usr/bin/env python3
"""Bounded load tests of two hostile situations, on loopback, for one or two shadowd builds in
the same run (give --baseline to compare with an older build):

- bad signatures: SECONDS of 15 KB AWS IoT requests that carry a valid access key id but a
  wrong signature, half of them listing one signed header thousands of times (the canonical
  request used to grow with the square of the request). Reports the largest refusal, the bytes
  of log written per refusal, shadowd's RSS and CPU.
- a hung receiver: durable reports (wrk, 32 connections, distinct shadows) with a webhook
  registration whose receiver accepts connections and never answers, beside a healthy one,
  against the same load with no registration. Reports the write rate as a ratio, RSS, CPU, and
  how the hung registration's events end (dead letters once maxAgeSeconds passed).
- many registrations: N webhook registrations to one healthy receiver; shadowd's threads,
  descriptors, RSS and CPU while they sit idle for SECONDS, then how long 10 writes take to
  reach every registration (N x 10 deliveries).

Usage: bench/hardening_load.py [--shadowd build/default/shadowd] [--baseline OLD_SHADOWD] [--seconds 10]
                              [--registrations 500]
"""
import argparse
import datetime
import hashlib
import hmac
import http.server
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

from proc import cpu_seconds, rss_mb

ACCESS_KEY, SECRET = "AKIABENCHEXAMPLE", "bench-secret"




class Shadowd:
    def __init__(self, binary, data, *args):
        self.log_path = os.path.join(data, "shadowd.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--store", f"sqlite:{data}/s.db", *args],
                                     stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            m = re.search(r"listening address=127\.0\.0\.1:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                return
            time.sleep(0.05)
        raise SystemExit("shadowd did not start: " + open(self.log_path).read())

    def log_bytes(self):
        return os.path.getsize(self.log_path)

    def request(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode() if body is not None else None,
                                     method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


def bad_signature_request(port, repeated):
    """A POST of ~14 KB (under the 16 KiB header limit) to UpdateThingShadow signed with a valid key
    id and a wrong signature."""
    amz_date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if repeated:  # one header named 600 times, sent 300 times: each mention repeats every value
        names = ";".join(["host", *(["x-pad-0000"] * 600), "x-amz-date"])
        pads = [("x-pad-0000", "v" * 8)] * 300
    else:
        pads = [(f"x-pad-{i:04d}", "v" * 8) for i in range(400)]
        names = ";".join(sorted(["host", "x-amz-date", *(n for n, _ in pads)]))
    auth = (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{amz_date[:8]}/us-east-1/iotdata/aws4_request, "
            f"SignedHeaders={names}, Signature={'0' * 64}")
    body = b'{"state":{"reported":{"a":1}}}'
    head = [f"POST /things/bench/shadow HTTP/1.1", f"Host: 127.0.0.1:{port}", f"X-Amz-Date: {amz_date}",
            f"Authorization: {auth}", f"Content-Length: {len(body)}"] + [f"{n}: {v}" for n, v in pads]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def bad_signatures(binary, seconds):
    with tempfile.TemporaryDirectory() as data:
        credentials = os.path.join(data, "credentials")
        with open(credentials, "w") as f:
            f.write(f"{ACCESS_KEY} {SECRET} admin\n")
        os.chmod(credentials, 0o600)
        server = Shadowd(binary, data, "--aws-credentials", credentials, "--max-response-bytes-in-flight", str(1 << 30))
        try:
            log_before, cpu_before = server.log_bytes(), cpu_seconds(server.proc.pid)
            requests, largest, peak_rss = 0, 0, rss_mb(server.proc.pid)
            stop = time.time() + seconds
            lock = threading.Lock()

            def attacker(repeated):
                nonlocal requests, largest, peak_rss
                payload = bad_signature_request(server.port, repeated)
                while time.time() < stop:
                    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
                        s.sendall(payload)
                        answer = b""
                        while True:
                            chunk = s.recv(1 << 20)
                            if not chunk:
                                break
                            answer += chunk
                            m = re.search(rb"Content-Length: (\d+)\r\n", answer)
                            end = answer.find(b"\r\n\r\n")
                            if m and end >= 0 and len(answer) >= end + 4 + int(m.group(1)):
                                break
                    with lock:
                        requests += 1
                        largest = max(largest, len(answer))
                        peak_rss = max(peak_rss, rss_mb(server.proc.pid))

            threads = [threading.Thread(target=attacker, args=(i % 2 == 0,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return {"refusals": requests, "largest_answer_bytes": largest,
                    "log_bytes_per_refusal": round((server.log_bytes() - log_before) / max(requests, 1), 1),
                    "log_bytes": server.log_bytes() - log_before, "peak_rss_mb": round(peak_rss, 1),
                    "cpu_ms_per_refusal": round(1000 * (cpu_seconds(server.proc.pid) - cpu_before) / max(requests, 1), 2)}
        finally:
            server.close()


class Healthy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Healthy.received += 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def hung_receiver(binary, seconds, max_age):
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(1024)
    held = []
    threading.Thread(target=lambda: [held.append(hung.accept()[0]) for _ in iter(int, 1)], daemon=True).start()
    healthy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=healthy.serve_forever, daemon=True).start()
    results = {}
    try:
        for label, registrations in (("none", {}),
                                     ("hung_and_healthy", {"hung": hung.getsockname()[1],
                                                           "healthy": healthy.server_address[1]})):
            with tempfile.TemporaryDirectory() as data:
                server = Shadowd(binary, data)
                try:
                    for rid, port in registrations.items():
                        server.request("PUT", f"/v1/registrations/{rid}",
                                       {"target": {"type": "webhook", "url": f"http://127.0.0.1:{port}/",
                                                   "timeoutMs": 5000},
                                        "maxAttempts": 1000, "maxAgeSeconds": max_age})
                    cpu_before = cpu_seconds(server.proc.pid)
                    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", "bench/wrk_report.lua", server.url],
                                         capture_output=True, text=True, check=True).stdout
                    run = {"writes_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
                           "cpu_s": round(cpu_seconds(server.proc.pid) - cpu_before, 1),
                           "rss_mb": round(rss_mb(server.proc.pid), 1)}
                    if registrations:
                        time.sleep(max_age + 2)  # the hung registration's events expire
                        status = server.request("GET", "/v1/registrations/hung")["status"]
                        run["hung_status_after_max_age"] = {k: status[k] for k in ("pending", "deadLetters", "lagSeconds")}
                        run["healthy_delivered"] = server.request("GET", "/v1/registrations/healthy")["status"]["delivered"]
                        run["rss_mb_after_expiry"] = round(rss_mb(server.proc.pid), 1)
                    results[label] = run
                finally:
                    server.close()
        results["write_ratio"] = round(results["hung_and_healthy"]["writes_per_s"] / results["none"]["writes_per_s"], 2)
    finally:
        healthy.shutdown()
        hung.close()
        for c in held:
            c.close()
    return results


def many_registrations(binary, n, seconds):
    healthy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=healthy.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as data:
            server = Shadowd(binary, data, "--max-registrations", str(n))
            try:
                pid = server.proc.pid
                threads_before = len(os.listdir(f"/proc/{pid}/task"))
                for i in range(n):
                    server.request("PUT", f"/v1/registrations/r{i}",
                                   {"target": {"type": "webhook", "url": f"http://127.0.0.1:{healthy.server_address[1]}/"}})
                time.sleep(1)
                cpu_before = cpu_seconds(pid)
                time.sleep(seconds)
                run = {"registrations": n, "threads_before": threads_before,
                       "threads": len(os.listdir(f"/proc/{pid}/task")),
                       "descriptors": len(os.listdir(f"/proc/{pid}/fd")),
                       "rss_mb": round(rss_mb(pid), 1),
                       "idle_cpu_s_per_s": round((cpu_seconds(pid) - cpu_before) / seconds, 3)}
                start = time.time()
                for i in range(10):
                    server.request("POST", f"/v1/things/t{i}/shadows/main/reported", {"state": {"n": i}})
                while time.time() - start < 300:
                    if all(server.request("GET", f"/v1/registrations/r{i}")["status"]["delivered"] == 10 for i in range(n)):
                        break
                    time.sleep(0.5)
                run["seconds_to_deliver_10_writes_to_all"] = round(time.time() - start, 2)
                return run
            finally:
                server.close()
    finally:
        healthy.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shadowd", default="build/default/shadowd")
    p.add_argument("--baseline", help="an older shadowd to measure in the same run")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--max-age", type=int, default=10, help="the hung registration's maxAgeSeconds")
    p.add_argument("--registrations", type=int, default=500)
    p.add_argument("--only", choices=["bad_signatures", "hung_receiver", "many_registrations"])
    args = p.parse_args()
    builds = [("new", args.shadowd)] + ([("baseline", args.baseline)] if args.baseline else [])
    report = {}
    wanted = lambda name: args.only in (None, name)  # noqa: E731
    for label, binary in builds:
        report[label] = {}
        if wanted("bad_signatures"):
            report[label]["bad_signatures"] = bad_signatures(binary, args.seconds)
        if wanted("many_registrations"):
            report[label]["many_registrations"] = many_registrations(binary, args.registrations, args.seconds)
    if wanted("hung_receiver"):
        report["new"]["hung_receiver"] = hung_receiver(args.shadowd, args.seconds, args.max_age)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
