#!/usr/bin/env bash
# The parse of an incoming report, Boost.JSON (the document core's) against simdjson 3.0, on the
# fixtures the comparison with the Go original uses (bench/go_original/make_fixtures.py); prints
# ns per report for each size, `rounds` times (bench/bench_parse.cpp says what each column is).
#
#   bench/parse_compare.sh [rounds] [build dir]
#
# simdjson is not a dependency of shadowd: this installs Debian's libsimdjson-dev when missing
# and reconfigures the build so that bench_parse is built.
set -euo pipefail
rounds=${1:-3}
build=${2:-build/default}
cd "$(dirname "$0")/.."
if ! dpkg -s libsimdjson-dev >/dev/null 2>&1; then
  echo "parse_compare: installing libsimdjson-dev" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libsimdjson-dev >/dev/null
fi
cmake "$build" >/dev/null
cmake --build "$build" --target bench_parse >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 bench/go_original/make_fixtures.py "$work/fixtures"
for round in $(seq "$rounds"); do
  echo "round $round"
  "$build/bench/bench_parse" "$work/fixtures"
done
