#!/usr/bin/env bash
# As-of reads against current GETs of the same shadow over HTTP, in one run: shadowd on SQLite,
# one shadow given EVENTS reports (through /v1/batch/update, 100 a request), then wrk (one
# thread, 4 connections) alternating GETs and as-of reads at random moments of its history,
# ROUNDS times each. Usage: bench/time_travel_http.sh [events] [seconds] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:-100000}"
seconds="${2:-10}"
rounds="${3:-3}"
shadowd="${SHADOWD:-build/default/shadowd}"
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT
source bench/lib.sh

"$shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/shadows.db" --durability normal 2>"$data/shadowd.log" &
url="http://127.0.0.1:$(port_of "$data/shadowd.log")"
python3 - "$url" "$events" <<'PY'
import json, sys, urllib.request
url, events = sys.argv[1], int(sys.argv[2])
for start in range(0, events, 100):
    ops = [{"thing": "tt-bench", "section": "reported",
            "state": {"temp": 20 + i % 7, "humidity": i % 50, f"m{i % 40}": i}} for i in range(start, min(start + 100, events))]
    req = urllib.request.Request(url + "/v1/batch/update", data=json.dumps({"operations": ops}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200
PY
bounds=$(curl -sf "$url/v1/things/tt-bench/shadows/main/history/bounds")
seconds_of() { python3 -c 'import sys,json,datetime; t=json.loads(sys.argv[1])[sys.argv[2]]["timestamp"]; d=datetime.datetime.fromisoformat(t[:26]+"+00:00"); print(f"{d.timestamp():.6f}")' "$bounds" "$1"; }
export THING=tt-bench FIRST=$(seconds_of oldest) LAST=$(seconds_of newest)
echo "history: $(curl -sf "$url/v1/things/tt-bench/shadows/main/history?limit=1" | python3 -c 'import sys,json; print(json.load(sys.stdin)["events"][0]["reported"]["version"])') events"
for round in $(seq "$rounds"); do
  for mode in get as-of; do
    echo "### round $round: $mode"
    MODE=$mode wrk -t1 -c4 -d"${seconds}s" --latency -s bench/wrk_as_of.lua "$url" | grep -E "Requests/sec|50%|99%|Non-2xx" || true
  done
done
