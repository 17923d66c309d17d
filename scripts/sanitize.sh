#!/usr/bin/env bash
# Builds and runs the test suite under sanitizers: `asan` (AddressSanitizer + UBSan) and
# `tsan` (ThreadSanitizer). Usage: scripts/sanitize.sh [asan|tsan]... [-- CTEST ARGS...]
# (default: asan; e.g. `scripts/sanitize.sh asan tsan -- -LE slow` leaves out the slow suites)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
presets=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do presets+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the "--"
for preset in "${presets[@]:-asan}"; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  scripts/with-services.sh ctest --preset "$preset" "$@"
done
