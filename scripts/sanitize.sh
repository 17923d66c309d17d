#!/usr/bin/env bash
# Builds and runs the test suite under sanitizers: `asan` (AddressSanitizer + UBSan) and
# `tsan` (ThreadSanitizer). Usage: scripts/sanitize.sh [asan|tsan]...  (default: asan)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
for preset in "${@:-asan}"; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  scripts/with-services.sh ctest --preset "$preset"
done
