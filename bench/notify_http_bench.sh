#!/usr/bin/env bash
# What notifications cost writers through shadowd: durable reports/s (wrk, 32 connections, to
# distinct shadows) with no registration and with three webhook registrations that deliver
# every report to a receiver on this machine (bench/http_ceiling: shadowd's transport answering
# a fixed 200), alternating ROUNDS times in one shadowd on SQLite (synchronous=FULL). Prints each
# round's rates and ratio, the events delivered while the registrations were on, and the
# registrations' backlog when a round ended. RECEIVER_NICE=N runs the receiver N nice levels
# down, as if it ran elsewhere and left the cores to shadowd.
# Usage: bench/notify_http_bench.sh [seconds] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
rounds="${2:-5}"
build=build/default
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT

source bench/lib.sh

${RECEIVER_NICE:+nice -n $RECEIVER_NICE} "$build/bench/http_ceiling" 0 2>"$data/receiver.log" &
receiver="http://127.0.0.1:$(port_of "$data/receiver.log")/hook"
"$build/shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/shadows.db" 2>"$data/shadowd.log" &
url="http://127.0.0.1:$(port_of "$data/shadowd.log")"

reports_per_second() {
  wrk -t2 -c32 -d"${seconds}s" -s bench/wrk_report.lua "$url" | awk '/Requests\/sec/ {printf "%.0f", $2}'
}
delivered() {
  curl -sf "$url/metrics" | awk '/^shadowd_notify_delivered_total/ {n += $2} END {printf "%.0f", n}'
}
registrations() {  # put|delete
  for r in 1 2 3; do
    if [ "$1" = put ]; then
      curl -sf -X PUT "$url/v1/registrations/bench-$r" -H 'Content-Type: application/json' \
        -d "{\"sections\":\"reported\",\"target\":{\"type\":\"webhook\",\"url\":\"$receiver\"}}" >/dev/null
    else
      curl -sf -X DELETE "$url/v1/registrations/bench-$r" >/dev/null
    fi
  done
}

echo "| round | reports/s, no registration | reports/s, 3 registrations | ratio | events delivered/s meanwhile | undelivered at the round's end |"
echo "|---|---|---|---|---|---|"
ratios=()
for round in $(seq "$rounds"); do
  # The database grows as it goes: odd rounds measure "none" first, even rounds second.
  [ $((round % 2)) = 1 ] && none=$(reports_per_second)
  registrations put
  before=$(delivered)
  three=$(reports_per_second)
  after=$(delivered)
  registrations delete
  sleep 2  # the dispatcher trims the deleted registrations' backlog from the feed
  [ $((round % 2)) = 0 ] && none=$(reports_per_second)
  made=$(awk -v r="$three" -v s="$seconds" 'BEGIN {printf "%.0f", 3 * r * s}')
  ratio=$(awk -v a="$three" -v b="$none" 'BEGIN {printf "%.2f", a / b}')
  ratios+=("$ratio")
  echo "| $round | $none | $three | $ratio | $(( (after - before) / seconds )) | $(( made - (after - before) )) of $made |"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END {printf "median ratio of %d rounds: %s (min %s, max %s)\n", NR, v[int((NR + 1) / 2)], v[1], v[NR]}'
