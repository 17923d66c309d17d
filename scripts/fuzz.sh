#!/usr/bin/env bash
# Runs the libFuzzer targets (clang, ASan + UBSan) for a bounded time each, seeded from the
# table-driven test cases. Usage: scripts/fuzz.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
corpus=build/fuzz/corpus/document
artifacts=build/fuzz/artifacts/
mkdir -p "$corpus" "$artifacts"
python3 fuzz/seed_corpus.py tests/core/cases "$corpus"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
build/fuzz/fuzz/fuzz_document "$corpus" -max_total_time="$seconds" -max_len=8192 -artifact_prefix="$artifacts" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 25
