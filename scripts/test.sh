#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds (ninja + ccache) and runs CTest with
# the services it needs (DynamoDB Local) started.
# Usage: scripts/test.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default
scripts/with-services.sh ctest --preset default "$@"
