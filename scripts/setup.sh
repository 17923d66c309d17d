#!/usr/bin/env bash
# Installs every Debian package deviceshadow needs to build, test and benchmark.
# Idempotent: packages already present are skipped without touching apt.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libboost-system1.81-dev
  libsqlite3-dev sqlite3 libssl-dev libcurl4-openssl-dev libfmt-dev
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libre2-dev valgrind curl wrk
  nginx-light   # bench/http_bench.sh: the independent ceiling (one worker, `return 200`)
  libpugixml-dev libmosquitto-dev mosquitto mosquitto-clients
  python3-yaml  # the build embeds docs/openapi.yaml in shadowd as JSON
  python3-prometheus-client  # e2e: /metrics read by Prometheus's own parser
  chromium      # the web console's browser tests (tests/e2e/test_console.py, with playwright-core)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# DynamoDB Local (tests) needs Java and npm; the machine image usually has both.
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# moto_server (SQS and SNS emulator) comes with the machine image's Python; PyPI is not reachable.
command -v moto_server >/dev/null 2>&1 || echo "setup: moto_server is missing: the SQS and SNS tests will fail" >&2
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
