#!/usr/bin/env bash
# What one request costs each server, counted rather than timed (so that it holds on a busy
# machine): user-space instructions (callgrind, the server alone, during a wrk run), system calls
# (strace -c -f) and context switches (/proc/PID/task/*/status) per request, for nginx (one
# worker, `return 200`), the fixed-200 ceiling on the I/O thread and on the worker pool, and
# shadowd's GET and durable report on SQLite. Usage: bench/http_counts.sh [seconds]
# SHADOWD and HTTP_CEILING name other builds' binaries (to compare builds).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
build=build/default
shadowd="$(realpath "${SHADOWD:-$build/shadowd}")"
ceiling_binary="$(realpath "${HTTP_CEILING:-$build/bench/http_ceiling}")"
data=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$data"' EXIT
source bench/lib.sh
nginx_port=$(free_port)
nginx_conf "$data/nginx" "$nginx_port" "master_process off;"

# start LABEL COMMAND...: starts a server (under $wrap) and sets pid and url.
start() {
  local label=$1
  shift
  # shellcheck disable=SC2086
  $wrap "$@" 2>"$data/$label.log" &
  pid=$!
  if [ "$label" = nginx ]; then
    url="http://127.0.0.1:$nginx_port"
    for _ in $(seq 100); do curl -sf -o /dev/null "$url/" && break; sleep 0.2; done
  else
    url="http://127.0.0.1:$(port_of "$data/$label.log")"
  fi
  if [ "$label" = get ]; then python3 bench/populate.py "$url" 1000 >/dev/null; fi
}
requests() { awk '/requests in/ {print $1}'; }
context_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
# Runs wrk and prints its output; a run with non-2xx answers does not count (under callgrind
# a few requests may time out: wrk's timeouts say so, their requests are not counted).
load() {  # THREADS CONNECTIONS SCRIPT URL
  local out
  out=$(SHADOWS=1000 wrk -t"$1" -c"$2" -d"${seconds}s" -s "$3" "$4")
  if grep -q "Socket errors" <<<"$out"; then echo "$3: $(grep 'Socket errors' <<<"$out")" >&2; fi
  if grep -q "Non-2xx" <<<"$out"; then echo "$3: $(grep 'Non-2xx' <<<"$out")" >&2; exit 1; fi
  echo "$out"
}
per() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

declare -A result
measure() {  # LABEL SCRIPT COMMAND...
  local label=$1 script=$2 out n
  shift 2
  # Instructions: callgrind counts from zero at the start of the run, dumps at its end.
  wrap="valgrind --tool=callgrind --callgrind-out-file=$data/cg.$label --instr-atstart=yes"
  start "$label" "$@"
  callgrind_control -z "$pid" >/dev/null 2>&1
  out=$(load 1 8 "$script" "$url")
  callgrind_control -d "$pid" >/dev/null 2>&1
  n=$(requests <<<"$out")
  local ir
  ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$data"/cg."$label".*)
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  result[$label]="$(per "$ir" "$n" | cut -d. -f1)"
  # System calls and context switches, unwrapped.
  wrap=""
  start "$label" "$@"
  local before after
  before=$(context_switches "$pid")
  out=$(load 2 32 "$script" "$url")
  after=$(context_switches "$pid")
  result[$label]+=" $(per $((after - before)) "$(requests <<<"$out")")"
  timeout $((seconds + 5)) strace -c -f -qq -p "$pid" -o "$data/strace.$label" 2>/dev/null &
  local tracer=$!
  sleep 1
  out=$(load 2 32 "$script" "$url")
  kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
  n=$(requests <<<"$out")
  result[$label]+=" $(awk -v n="$n" '$NF == "total" {printf "%.2f", $4 / n}' "$data/strace.$label")"
  result[$label]+=" $(awk -v n="$n" '$NF == "futex" {printf "%.2f", $4 / n}' "$data/strace.$label")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

measure nginx bench/wrk_fixed.lua nginx -p "$data/nginx" -c "$data/nginx/nginx.conf" -e "$data/nginx/error.log"
measure ceiling bench/wrk_fixed.lua "$ceiling_binary" 0
measure pool bench/wrk_fixed.lua "$ceiling_binary" 0 pool
measure get bench/wrk_get.lua "$shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/get.db"
measure report bench/wrk_report.lua "$shadowd" --listen 127.0.0.1:0 --store "sqlite:$data/report.db"

echo "### per request (instructions: user space, callgrind; system calls: strace -c -f)"
printf '%-8s %13s %18s %13s %7s\n' server instructions context-switches system-calls futex
for label in nginx ceiling pool get report; do
  # shellcheck disable=SC2086
  printf '%-8s %13s %18s %13s %7s\n' "$label" ${result[$label]}
done
