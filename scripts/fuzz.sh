#!/usr/bin/env bash
# Runs the libFuzzer targets (clang, ASan + UBSan) for a bounded time each, seeded from the
# table-driven test cases (the document pipeline), fuzz/http1_seeds (the webhook client's
# response reader) and fuzz/filter_seeds (the fleet-query filter parser).
# Usage: scripts/fuzz.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_document fuzz_http1 fuzz_filter
artifacts=build/fuzz/artifacts/
mkdir -p build/fuzz/corpus/document build/fuzz/corpus/http1 build/fuzz/corpus/filter "$artifacts"
python3 fuzz/seed_corpus.py tests/core/cases build/fuzz/corpus/document
cp fuzz/http1_seeds/* build/fuzz/corpus/http1/
cp fuzz/filter_seeds/* build/fuzz/corpus/filter/
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for target in document http1 filter; do  # the document pipeline; the webhook client's response reader; filters
  echo "fuzz_$target, $seconds s:"
  build/fuzz/fuzz/fuzz_$target build/fuzz/corpus/$target -max_total_time="$seconds" -max_len=8192 -artifact_prefix="$artifacts" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 25
done
