#!/usr/bin/env bash
# The AWS IoT API against API v1 on one shadowd (SQLite, synchronous=FULL, open, no signatures):
# durable reports to distinct shadows and GETs of random shadows, each operation through both
# APIs in alternating rounds of wrk -t2 -c32, so that both see the same machine load.
# Prints requests/s per round and the median ratio AWS / v1 per operation.
# Usage: bench/aws_bench.sh [seconds per round] [rounds] [shadows]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
rounds="${2:-3}"
shadows="${3:-10000}"
build=build/default
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT
source bench/lib.sh

"$build/shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/shadows.db" 2>"$data/shadowd.log" &
url="http://127.0.0.1:$(port_of "$data/shadowd.log")"
python3 bench/populate.py "$url" "$shadows" >/dev/null

rate() {  # api script → requests/s
  API="$1" SHADOWS="$shadows" wrk -t2 -c32 -d"${seconds}s" -s "$2" "$url" | awk '/Requests\/sec/ {print $2}'
}
for op in report get; do
  ratios=()
  for round in $(seq "$rounds"); do
    v1=$(rate v1 "bench/wrk_$op.lua")
    aws=$(rate aws "bench/wrk_$op.lua")
    ratio=$(awk -v a="$aws" -v b="$v1" 'BEGIN {printf "%.3f", a / b}')
    ratios+=("$ratio")
    echo "$op round $round: v1 $v1/s, AWS IoT API $aws/s, ratio $ratio"
  done
  median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$op: median ratio AWS IoT API / v1 = $median"
done
