#!/usr/bin/env bash
# Sets up, builds and starts shadowd on the embedded SQLite default
# (./shadowd-data/shadows.db, relative to the repository). Arguments go to shadowd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target shadowd shadowctl
exec build/default/shadowd "$@"
