#!/usr/bin/env bash
# Instructions per operation (callgrind), repeatable whatever else the machine is doing: the
# full report (R reports less none, over R) and parse-merge-acknowledge (R of them with their
# stored sections copied in, less R copies alone, over R). Usage: bench/callgrind_document.sh [build dir]
set -euo pipefail
bin="${1:-build/default}/bench/bench_document"
count() {  # repeats leaves operation
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --repeat "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-8s %-22s %s\n' leaves full-report parse-merge-acknowledge
for leaves in 10 100 1000; do
  repeats=$((20000 / leaves))
  base=$(count 0 "$leaves" full)
  full=$(count "$repeats" "$leaves" full)
  merge=$(count "$repeats" "$leaves" merge)
  copy=$(count "$repeats" "$leaves" copy)
  printf '%-8s %-22s %s\n' "$leaves" $(((full - base) / repeats)) $(((merge - copy) / repeats))
done
