#!/usr/bin/env bash
# Installs the npm package playwright-core (the Playwright library without its browser download,
# which cannot work offline) under .cache/playwright if it is not there, and prints that
# directory's node_modules path, for the console's browser tests (tests/e2e/test_console.py).
# The browser is Debian's chromium (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=.cache/playwright
version=1.65.1
if [ ! -d "$prefix/node_modules/playwright-core" ] || [ "$(cat "$prefix/version" 2>/dev/null)" != "$version" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "playwright-core@$version" >&2
  echo "$version" >"$prefix/version"
fi
echo "$PWD/$prefix/node_modules"
