#!/usr/bin/env bash
# Instructions per operation (callgrind), repeatable whatever else the machine is doing: the
# full report (R reports less none, over R), the same keeping per-leaf times (stored times
# uniform, then distinct per leaf; each with its ratio to the full report), a report of a tenth
# of the leaves without and with (distinct) times, and parse-merge-acknowledge (R of them with their
# stored sections copied in, less R copies alone, over R). Usage: bench/callgrind_document.sh [build dir]
set -euo pipefail
bin="${1:-build/default}/bench/bench_document"
count() {  # repeats leaves operation
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --repeat "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-8s %-12s %-24s %-24s %-12s %-24s %s\n' leaves full-report "with-times (ratio)" "distinct-times (ratio)" \
  partial "partial-times (ratio)" parse-merge-acknowledge
for leaves in 10 100 1000; do
  repeats=$((20000 / leaves))
  base=$(count 0 "$leaves" full)
  full=$(count "$repeats" "$leaves" full)
  times=$(count "$repeats" "$leaves" times)
  distinct=$(count "$repeats" "$leaves" distinct-times)
  partial=$(count "$repeats" "$leaves" partial)
  partial_times=$(count "$repeats" "$leaves" partial-times)
  merge=$(count "$repeats" "$leaves" merge)
  copy=$(count "$repeats" "$leaves" copy)
  f=$(((full - base) / repeats)) t=$(((times - base) / repeats)) d=$(((distinct - base) / repeats))
  p=$(((partial - base) / repeats)) pt=$(((partial_times - base) / repeats))
  ratio() { awk "BEGIN{printf \"%.3f\", $1/$2}"; }
  printf '%-8s %-12s %-24s %-24s %-12s %-24s %s\n' "$leaves" "$f" "$t ($(ratio "$t" "$f"))" "$d ($(ratio "$d" "$f"))" \
    "$p" "$pt ($(ratio "$pt" "$p"))" $(((merge - copy) / repeats))
done
