#!/usr/bin/env bash
# Instructions per full report (callgrind), repeatable whatever else the machine is doing:
# the difference between R reports and none, divided by R. Usage: bench/callgrind_document.sh [build dir]
set -euo pipefail
bin="${1:-build/default}/bench/bench_document"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --repeat "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-8s %s\n' leaves instructions/report
for leaves in 10 100 1000; do
  repeats=$((20000 / leaves))
  base=$(count 0 "$leaves")
  total=$(count "$repeats" "$leaves")
  printf '%-8s %s\n' "$leaves" $(((total - base) / repeats))
done
