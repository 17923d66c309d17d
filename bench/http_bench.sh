#!/usr/bin/env bash
# HTTP benchmark with wrk (-t2 -c32) against nginx in the same run. Starts nginx (one worker,
# `return 200`), the fixed-200 ceiling (bench/http_ceiling: shadowd's own transport) and shadowd
# on SQLite (synchronous=FULL), stores SHADOWS shadows, then measures ROUNDS rounds, each
# alternating nginx, the ceiling (its handler on the I/O thread), the ceiling with its handler on
# the worker pool (where store calls run), GETs of random shadows and durable reports to distinct
# shadows,
# and prints each workload's median rate and its ratio to nginx's median; then shadowd's RSS.
# Usage: bench/http_bench.sh [seconds per run] [shadows] [rounds]
# SHADOWD and HTTP_CEILING name other builds' binaries (to compare builds in one session);
# SHADOWD_ARGS adds options to shadowd (e.g. "--io-threads 2").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
shadows="${2:-1000000}"
rounds="${3:-3}"
build=build/default
shadowd="${SHADOWD:-$build/shadowd}"
ceiling_binary="${HTTP_CEILING:-$build/bench/http_ceiling}"
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT

source bench/lib.sh
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
# nginx needs no root: every path it writes is under $data.
nginx_port=$(free_port)
nginx_conf "$data/nginx" "$nginx_port"
nginx -p "$data/nginx" -c "$data/nginx/nginx.conf" -e "$data/nginx/error.log" &
"$ceiling_binary" 0 2>"$data/ceiling.log" &
"$ceiling_binary" 0 pool 2>"$data/ceiling_pool.log" &
# shellcheck disable=SC2086
"$shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/shadows.db" ${SHADOWD_ARGS:-} 2>"$data/shadowd.log" &
server=$!
url="http://127.0.0.1:$(port_of "$data/shadowd.log")"
ceiling_url="http://127.0.0.1:$(port_of "$data/ceiling.log")"
ceiling_pool_url="http://127.0.0.1:$(port_of "$data/ceiling_pool.log")"
nginx_url="http://127.0.0.1:$nginx_port"
for _ in $(seq 50); do curl -sf -o /dev/null "$nginx_url/" && break; sleep 0.1; done

echo "### populating $shadows shadows"
time python3 bench/populate.py "$url" "$shadows"

declare -A rates p99s
run_wrk() {  # key url script
  local out
  out=$(SHADOWS="$shadows" wrk -t2 -c32 -d"${seconds}s" --latency -s "$3" "$2")
  if grep -qE "Non-2xx|Socket errors" <<<"$out"; then echo "$1: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2; fi
  rates[$1]+="$(awk '/Requests\/sec/ {print $2}' <<<"$out") "
  p99s[$1]+="$(awk '$1 == "99%" {print $2}' <<<"$out") "
  echo "round $round $1: $(awk '/Requests\/sec/ {print $2}' <<<"$out")/s p99 $(awk '$1 == "99%" {print $2}' <<<"$out")"
}
for round in $(seq "$rounds"); do
  run_wrk nginx "$nginx_url" bench/wrk_fixed.lua
  run_wrk ceiling "$ceiling_url" bench/wrk_fixed.lua
  run_wrk pool "$ceiling_pool_url" bench/wrk_fixed.lua
  run_wrk get "$url" bench/wrk_get.lua
  run_wrk report "$url" bench/wrk_report.lua
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
nginx_rate=$(median <<<"${rates[nginx]}")
echo "### medians of $rounds rounds of ${seconds}s (ratio: to nginx's median)"
printf '%-8s %12s %7s  %s\n' workload requests/s ratio "p99 per round"
for key in nginx ceiling pool get report; do
  rate=$(median <<<"${rates[$key]}")
  printf '%-8s %12.0f %7.2f  %s\n' "$key" "$rate" "$(awk -v a="$rate" -v b="$nginx_rate" 'BEGIN {print a / b}')" "${p99s[$key]}"
done
echo "### shadowd RSS with $shadows shadows stored (+ the report runs'): $(rss_mb $server) MB"
