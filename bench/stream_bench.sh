#!/usr/bin/env bash
# Notifications from a DynamoDB table's stream under a steady write rate: two shadowd on one
# fresh DynamoDB Local table (combined layout, --history stream): the reader takes the stream's
# shard first, the writer serves the writes; a webhook registration delivers to a receiver that
# takes each event's write time from its id. Reports, per write rate: the latency from the write
# to the event's receipt (p50, p99), the reader's CPU time per write read from the stream (it
# assembles the write, puts its history event, and delivers it), and whether delivery kept up.
# Usage: bench/stream_bench.sh [seconds per rate] [rates...]   (default: 10 s at 100 500 1000/s)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
seconds="${1:-10}"
shift || true
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(100 500 1000)
build=build/default
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; scripts/dynamodb-local.sh stop "$dir"; rm -rf "$dir"' EXIT
scripts/dynamodb-local.sh start "$dir"
endpoint=$(cat "$dir/endpoint")
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1

metric() {  # URL NAME: the value of one sample of shadowd's /metrics (0 when absent)
  curl -s "$1/metrics" | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'
}
start_shadowd() {  # NAME: starts shadowd on the table; prints its URL and PID
  local log="$dir/$1.log"
  "$build/shadowd" --listen 127.0.0.1:0 --store "dynamodb:$table" --dynamodb-endpoint "$endpoint" \
    --layout combined --history stream 2>"$log" &
  local pid=$! port
  port=$(port_of "$log")
  echo "http://127.0.0.1:$port $pid"
}

table="stream-bench"
"$build/shadowd" dynamodb create-table --table "$table" --dynamodb-endpoint "$endpoint" >/dev/null
read -r reader reader_pid < <(start_shadowd reader)
for _ in $(seq 100); do [ "$(metric "$reader" shadowd_stream_shards)" -ge 1 ] && break; sleep 0.2; done
read -r writer _ < <(start_shadowd writer)

python3 - "$writer" "$reader" "$seconds" "$(getconf CLK_TCK)" "$reader_pid" "${rates[@]}" <<'PY'
import http.client, json, socket, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

writer, reader, seconds, tck, reader_pid = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rates = [int(r) for r in sys.argv[6:]]
received, lock = [], threading.Lock()

class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        now = time.time_ns()
        event = json.loads(body)
        with lock:
            received.append((event["id"], now - int(event["id"][:20])))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()

def request(base, method, path, body=None):
    r = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                               headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=30) as answer:
        return answer.read()

def metric(base, name):
    for line in request(base, "GET", "/metrics").decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

def cpu_seconds():
    with open(f"/proc/{reader_pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tck

request(writer, "PUT", "/v1/registrations/bench",
        {"target": {"type": "webhook", "url": f"http://127.0.0.1:{server.server_address[1]}/"}})
deadline = time.time() + 30
while time.time() < deadline:  # the reader learns of the registration by its refresh (5 s)
    try:
        request(reader, "GET", "/v1/registrations/bench")
        break
    except Exception:
        time.sleep(0.5)

def write_at(rate, threads=16):
    """Reports to distinct shadows at `rate` writes/s for `seconds`; returns the writes acknowledged."""
    done, stop_at = [0], time.time() + seconds
    host, port = writer.replace("http://", "").split(":")
    def run(t):
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        n, start = 0, time.time()
        while True:
            due = start + n * threads / rate
            if due > stop_at:
                break
            time.sleep(max(0.0, due - time.time()))
            c.request("POST", f"/v1/things/bench-{t}-{n % 200}/shadows/main/reported",
                      body=json.dumps({"state": {"v": n, "t": time.time_ns()}}), headers={"Content-Type": "application/json"})
            if c.getresponse().read() is not None:
                n += 1
        with lock:
            done[0] += n
    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done[0]

print("| writes/s asked (achieved) | events delivered | latency write → receipt p50 / p99 | reader CPU per write | caught up after the writes stopped |")
print("|---|---|---|---|---|")
for rate in rates:
    with lock:
        received.clear()
    read_before, cpu_before, t0 = metric(reader, "shadowd_stream_writes_total"), cpu_seconds(), time.time()
    writes = write_at(rate)
    elapsed = time.time() - t0
    stopped = time.time()
    while time.time() - stopped < 120:
        with lock:
            if len({i for i, _ in received}) >= writes:
                break
        time.sleep(0.1)
    caught_up = time.time() - stopped
    read = metric(reader, "shadowd_stream_writes_total") - read_before
    cpu = cpu_seconds() - cpu_before
    with lock:
        lat = sorted(l for _, l in received)
        events = len({i for i, _ in received})
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1e6 if lat else float("nan")
    print(f"| {rate} ({writes / elapsed:.0f}) | {events} of {writes} | {p(0.5):.1f} ms / {p(0.99):.1f} ms "
          f"| {cpu / max(read, 1) * 1e6:.0f} µs | {caught_up:.1f} s |")
PY
