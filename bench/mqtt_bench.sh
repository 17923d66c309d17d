#!/usr/bin/env bash
# AWS IoT shadow updates over MQTT: 32 device clients (bench_mqtt), each with one update in
# flight through Mosquitto to shadowd --mqtt (SQLite, synchronous=FULL), against the broker's own
# publish→deliver round trips (the same clients echoing through it) in alternating rounds.
# With DynamoDB Local running (DS_DYNAMODB_ENDPOINT, as scripts/with-services.sh sets it) it
# also measures what claiming each request costs: shadowd on one table with --mqtt-claim 3s
# against --mqtt-claim 0, alternating.
# Prints each round (with the CPU time each round trip cost shadowd, the broker and the clients)
# and the median ratios.
# Usage: [scripts/with-services.sh] bench/mqtt_bench.sh [seconds per round] [rounds] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
seconds="${1:-5}"
rounds="${2:-3}"
clients="${3:-32}"
build=build/default
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; scripts/mosquitto.sh stop "$data/broker" >/dev/null 2>&1 || true; rm -rf "$data"' EXIT

scripts/mosquitto.sh start "$data/broker"
broker=$(cat "$data/broker/url")
port=${broker##*:}

start_shadowd() {  # log file, shadowd options… → waits until it serves MQTT; sets $shadowd_pid
  local log="$1"; shift
  "$build/shadowd" --listen 127.0.0.1:0 --mqtt "$broker" "$@" 2>"$log" &
  shadowd_pid=$!
  for _ in $(seq 100); do grep -q "mqtt: connected" "$log" && break; sleep 0.1; done
  "$build/bench/bench_mqtt" shadow "$port" "$clients" 1 warm >/dev/null  # the shadows exist from here
}
rate() { awk '{sub("/s", "", $2); print $2}' <<<"$1"; }
mean_ms() {  # log file, store operation → its mean latency in ms, from shadowd's /metrics
  local port; port=$(port_of "$1")
  curl -s "http://127.0.0.1:$port/metrics" | awk -v op="operation=\"$2\"" '
    index($0, "shadowd_store_operation_duration_seconds_sum{" op) == 1 {s = $2}
    index($0, "shadowd_store_operation_duration_seconds_count{" op) == 1 {n = $2}
    END {if (n > 0) printf "%.2f", 1000 * s / n; else print "-"}'
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # user + system, in clock ticks
# measure MODE: one run of bench_mqtt; prints its line, then the CPU µs each round trip cost
# shadowd, the broker and the clients (bash's `time` of the clients' process).
measure() {
  local s0 m0 s1 m1 line client_cpu n
  s0=$(cpu_ticks "$shadowd_pid"); m0=$(cpu_ticks "$broker_pid")
  { TIMEFORMAT='%U %S'; time "$build/bench/bench_mqtt" "$1" "$port" "$clients" "$seconds" >"$data/line"; } 2>"$data/time"
  s1=$(cpu_ticks "$shadowd_pid"); m1=$(cpu_ticks "$broker_pid")
  line=$(cat "$data/line"); client_cpu=$(awk '{print $1 + $2}' "$data/time")
  n=$(awk -v r="$(rate "$line")" -v s="$seconds" 'BEGIN {print r * s}')
  awk -v line="$line" -v n="$n" -v s=$((s1 - s0)) -v m=$((m1 - m0)) -v c="$client_cpu" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s (CPU µs a round trip: shadowd %.0f, broker %.0f, clients %.0f)", line, s * 1e6 / hz / n, m * 1e6 / hz / n, c * 1e6 / n}'
}
broker_pid=$(cat "$data/broker/pid")
start_shadowd "$data/shadowd.log" --store "${BENCH_STORE:-sqlite:$data/shadows.db}"
ratios=()
for round in $(seq "$rounds"); do
  echo_line=$(measure echo)
  shadow_line=$(measure shadow)
  ratio=$(awk -v a="$(rate "$shadow_line")" -v b="$(rate "$echo_line")" 'BEGIN {printf "%.3f", a / b}')
  ratios+=("$ratio")
  echo "round $round: broker $echo_line | shadowd $shadow_line | ratio $ratio"
done
echo "median ratio shadow updates / broker round trips = $(median "${ratios[@]}")"
kill "$shadowd_pid"; wait "$shadowd_pid" 2>/dev/null || true

if [ -n "${DS_DYNAMODB_ENDPOINT:-}" ]; then
  table="mqtt-bench-$RANDOM$RANDOM"
  "$build/shadowd" dynamodb create-table --table "$table" --dynamodb-endpoint "$DS_DYNAMODB_ENDPOINT" >/dev/null
  for claim in 0 3s; do  # DynamoDB Local warms up (JIT, the items come to exist): not measured
    start_shadowd "$data/warm-$claim.log" --store "dynamodb:$table" --dynamodb-endpoint "$DS_DYNAMODB_ENDPOINT" \
      --mqtt-claim "$claim"
    "$build/bench/bench_mqtt" shadow "$port" "$clients" "$seconds" >/dev/null
    kill "$shadowd_pid"; wait "$shadowd_pid" 2>/dev/null || true
  done
  ratios=()
  for round in $(seq "$rounds"); do
    lines=()
    for claim in 0 3s; do
      start_shadowd "$data/shadowd-$claim.log" --store "dynamodb:$table" --dynamodb-endpoint "$DS_DYNAMODB_ENDPOINT" \
        --mqtt-claim "$claim"
      lines+=("$("$build/bench/bench_mqtt" shadow "$port" "$clients" "$seconds")")
      [ "$claim" = 0 ] || costs="claim $(mean_ms "$data/shadowd-$claim.log" claim) ms, write $(mean_ms "$data/shadowd-$claim.log" write) ms"
      kill "$shadowd_pid"; wait "$shadowd_pid" 2>/dev/null || true
    done
    ratio=$(awk -v a="$(rate "${lines[1]}")" -v b="$(rate "${lines[0]}")" 'BEGIN {printf "%.3f", a / b}')
    ratios+=("$ratio")
    echo "DynamoDB round $round: no claim ${lines[0]} | claim ${lines[1]} | ratio $ratio | mean store calls: $costs"
  done
  echo "median ratio with claims / without, on DynamoDB Local = $(median "${ratios[@]}")"
fi
