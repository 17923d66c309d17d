#!/usr/bin/env bash
# HTTP benchmark with wrk, 32 connections: the ceiling (fixed 200 on the same transport), then
# durable reports to distinct shadows and GETs on shadowd over SQLite (synchronous=FULL), then
# shadowd's RSS with SHADOWS shadows stored. Usage: bench/http_bench.sh [seconds] [shadows]
# SHADOWD and HTTP_CEILING name other builds' binaries (to compare builds in one session).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
shadows="${2:-1000000}"
build=build/default
shadowd="${SHADOWD:-$build/shadowd}"
ceiling_binary="${HTTP_CEILING:-$build/bench/http_ceiling}"
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT

source bench/lib.sh
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
run_wrk() {  # label url script
  echo "### $1"
  SHADOWS="$shadows" wrk -t2 -c32 -d"${seconds}s" --latency -s "$3" "$2" | grep -E "Requests/sec|Latency|50%|99%|Non-2xx|Socket errors" || true
}

"$ceiling_binary" 0 2>"$data/ceiling.log" &
ceiling=$!
run_wrk "ceiling: fixed 200 on the same transport" "http://127.0.0.1:$(port_of "$data/ceiling.log")" bench/wrk_fixed.lua
kill $ceiling

"$shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/shadows.db" 2>"$data/shadowd.log" &
server=$!
url="http://127.0.0.1:$(port_of "$data/shadowd.log")"
run_wrk "shadowd: durable reports to distinct shadows" "$url" bench/wrk_report.lua
echo "### populating $shadows shadows"
time python3 bench/populate.py "$url" "$shadows"
run_wrk "shadowd: GET of random shadows among $shadows" "$url" bench/wrk_get.lua
echo "### shadowd RSS with $shadows shadows stored (+ the report run's): $(rss_mb $server) MB"
