#!/usr/bin/env python3
"""The AWS IoT MQTT bridge under one flooding device, on loopback and bounded in time and bytes.

A Mosquitto (scripts/mosquitto.sh) and a shadowd --mqtt on SQLite are started afresh for each
scenario. One device floods its own classic shadow's update topic through mosquitto_pub -l,
listening to its own answers (…/update/accepted, delta and documents, as AWS devices do); another
device asks for its own shadow (…/other/shadow/get) every 200 ms throughout. Scenarios:

  oversized  payloads of 10 MB, over --max-body-bytes (1 MiB)
  updates    valid updates of a 60,000-byte reported value, for --seconds
  stalled    the same, and then the broker stops reading (SIGSTOP) for --stall seconds, as a
             broker that takes shadowd's answers slower than shadowd makes them

Reports per scenario: what was sent, shadowd's peak RSS (VmHWM) and RSS afterwards, the other
device's answer latency while the flood is sent and for 2 s after (p50, max; unanswered after
10 s), in the stalled scenario the latency of its first request once the broker reads again,
and shadowd's MQTT metrics.

Usage: bench/mqtt_flood.py [--shadowd build/default/shadowd] [--seconds 4] [--max-mb 300] [--stall 3]
                           [--rss-limit-mb 4096] [--scenario oversized|updates|stalled]… [-- shadowd options…]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MB = 1 << 20


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))


class Broker:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mqtt-flood-")
        subprocess.run([os.path.join(ROOT, "scripts/mosquitto.sh"), "start", self.dir], check=True)
        with open(os.path.join(self.dir, "url")) as f:
            self.url = f.read().strip()
        self.port = self.url.rsplit(":", 1)[1]
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read())

    def close(self):
        subprocess.run([os.path.join(ROOT, "scripts/mosquitto.sh"), "stop", self.dir])
        shutil.rmtree(self.dir, ignore_errors=True)


class Shadowd:
    def __init__(self, binary, broker, args):
        self.dir = tempfile.mkdtemp(prefix="shadowd-flood-")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--store", f"sqlite:{self.dir}/shadows.db",
                                      "--mqtt", broker.url, *args], stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            with open(self.log.name) as f:
                text = f.read()
            m = re.search(r"listening address=127\.0\.0\.1:(\d+)", text)
            if m and "mqtt: connected" in text:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                return
            time.sleep(0.05)
        raise RuntimeError("shadowd did not start: " + text)

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"(?m)^(shadowd_mqtt_\w+) (\S+)$", text)}

    def put_reported(self, thing, state):
        r = urllib.request.Request(f"{self.url}/v1/things/{thing}/shadows/main/reported", method="POST",
                                   data=json.dumps({"state": state}).encode(), headers={"Content-Type": "application/json"})
        urllib.request.urlopen(r, timeout=30).close()

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sub:
    """mosquitto_sub recording (arrival time, topic, payload) of each message, or only counting."""

    def __init__(self, broker, topics, keep=True):
        self.events = []
        self.count = 0
        self.keep = keep
        self.lock = threading.Lock()
        topic_args = [a for t in ([topics] if isinstance(topics, str) else topics) for a in ("-t", t)]
        self.proc = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", broker.port, "-q", "1", *topic_args,
                                      "-F", "%t %p" if keep else "%t"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            with self.lock:
                self.count += 1
                if self.keep:
                    topic, _, payload = line.decode(errors="replace").rstrip("\n").partition(" ")
                    self.events.append((now, topic, payload))

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def flood_lines(scenario, seconds, max_bytes):
    """Yields the flooding device's payloads, one per line, within the bounds."""
    started = time.monotonic()
    sent = n = 0
    while time.monotonic() - started < seconds and sent < max_bytes:
        n += 1
        if scenario == "oversized":
            line = '{"state":{"reported":{"blob":"' + "x" * (10 * MB) + '"}},"clientToken":"f' + str(n) + '"}'
        else:
            line = '{"state":{"reported":{"blob":"' + ("%09d" % n) * 6666 + '"}},"clientToken":"f' + str(n) + '"}'
        sent += len(line)
        yield line.encode() + b"\n"


def run(args, scenario):
    broker = Broker()
    server = Shadowd(args.shadowd, broker, args.shadowd_args)
    subs = []
    finished = threading.Event()
    try:
        server.put_reported("other", {"on": True})
        other = Sub(broker, "$aws/things/other/shadow/get/accepted")
        subs.append(other)
        flood = "$aws/things/flood/shadow/update/"
        subs.append(Sub(broker, [flood + "accepted", flood + "delta", flood + "documents"], keep=False))  # the device listens
        rejected = Sub(broker, flood + "rejected")
        subs.append(rejected)
        time.sleep(1)  # the subscriptions are in place
        baseline_kb = status_kb(server.proc.pid, "VmRSS")
        asked = {}

        def ask_other(token):
            asked[token] = time.monotonic()
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", broker.port, "-q", "1", "-t",
                            "$aws/things/other/shadow/get", "-m", json.dumps({"clientToken": token})], check=True)

        def answered():
            with other.lock:
                return {re.search(r'"clientToken":"([^"]+)"', p).group(1): t for t, _, p in other.events
                        if '"clientToken"' in p}

        stop_asking = threading.Event()

        def ask():
            n = 0
            while not stop_asking.is_set():
                n += 1
                ask_other(f"o{n}")
                stop_asking.wait(0.2)

        def guard():  # this is a shared machine: a shadowd past --rss-limit-mb is killed, and the run says so
            while not finished.is_set() and server.proc.poll() is None:
                if status_kb(server.proc.pid, "VmRSS") > args.rss_limit_mb * 1024:
                    killed.append(status_kb(server.proc.pid, "VmRSS") // 1024)
                    server.proc.kill()
                    return
                time.sleep(0.02)

        killed = []
        threading.Thread(target=guard, daemon=True).start()
        asker = threading.Thread(target=ask)
        flooder = subprocess.Popen(["mosquitto_pub", "-h", "127.0.0.1", "-p", broker.port, "-q", "1", "-t",
                                    flood[:-1], "-l"], stdin=subprocess.PIPE)
        started = time.monotonic()
        asker.start()
        sent = 0
        try:
            for line in flood_lines(scenario, args.seconds, args.max_mb * MB):
                flooder.stdin.write(line)
                sent += len(line)
            flooder.stdin.close()
        except BrokenPipeError:
            pass
        flooder.wait()
        flood_seconds = time.monotonic() - started
        if scenario == "stalled":
            stop_asking.set()  # mosquitto_pub would wait for the stopped broker
            asker.join()
            os.kill(broker.pid, signal.SIGSTOP)
            time.sleep(args.stall)
            os.kill(broker.pid, signal.SIGCONT)
            ask_other("after")  # how long the backlog makes it wait once the broker reads again
        else:
            time.sleep(2)  # the backlog is served meanwhile
            stop_asking.set()
            asker.join()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(answered()) < len(asked) and not killed:
            time.sleep(0.1)
        if killed:
            print(json.dumps({"scenario": scenario, "sent_mb": round(sent / MB, 1), "killed_at_rss_mb": killed[0]}), flush=True)
            return
        got = answered()
        latencies = sorted((got[k] - asked[k]) * 1000 for k in asked if k in got and k != "after")
        codes = {}
        with rejected.lock:
            for _, _, p in rejected.events:
                m = re.search(r'"code":(\d+)', p)
                codes[m.group(1) if m else "?"] = codes.get(m.group(1) if m else "?", 0) + 1
        metrics = server.metrics()
        result = {
            "scenario": scenario,
            "sent_mb": round(sent / MB, 1),
            "flood_s": round(flood_seconds, 2),
            "rss_before_mb": round(baseline_kb / 1024, 1),
            "rss_peak_mb": round(status_kb(server.proc.pid, "VmHWM") / 1024, 1),
            "rss_after_mb": round(status_kb(server.proc.pid, "VmRSS") / 1024, 1),
            "other_asked": len(latencies) + sum(1 for k in asked if k not in got and k != "after"),
            "other_unanswered": sum(1 for k in asked if k not in got and k != "after"),
            "other_p50_ms": round(latencies[len(latencies) // 2], 1) if latencies else None,
            "other_max_ms": round(latencies[-1], 1) if latencies else None,
            "flood_rejected_codes": codes,
            "metrics": {k[len("shadowd_mqtt_"):]: int(v) for k, v in metrics.items()},
        }
        if "after" in asked:
            result["other_after_stall_ms"] = round((got["after"] - asked["after"]) * 1000, 1) if "after" in got else None
        print(json.dumps(result), flush=True)
    finally:
        finished.set()
        for s in subs:
            s.close()
        server.close()
        broker.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shadowd", default=os.path.join(ROOT, "build/default/shadowd"))
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--max-mb", type=int, default=300, help="bytes the flooding device sends, at most")
    p.add_argument("--rss-limit-mb", type=int, default=4096, help="shadowd is killed past this RSS")
    p.add_argument("--stall", type=float, default=3, help="seconds the broker stops reading in the stalled scenario")
    p.add_argument("--scenario", choices=["oversized", "updates", "stalled"], action="append")
    p.add_argument("shadowd_args", nargs="*")
    args = p.parse_args()
    for scenario in args.scenario or ["oversized", "updates", "stalled"]:
        run(args, scenario)


if __name__ == "__main__":
    sys.exit(main())
