#!/usr/bin/env bash
# Lints docs/openapi.yaml with Redocly's CLI (npm package @redocly/cli, installed under .cache/)
# and the rules of docs/redocly.yaml. Run by CTest as openapi_lint.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=.cache/redocly
version=2.77.0
if [ ! -x "$prefix/node_modules/.bin/redocly" ] || [ "$(cat "$prefix/version" 2>/dev/null)" != "$version" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "@redocly/cli@$version" >/dev/null
  echo "$version" >"$prefix/version"
fi
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
exec "$prefix/node_modules/.bin/redocly" lint --config docs/redocly.yaml --format=stylish docs/openapi.yaml
