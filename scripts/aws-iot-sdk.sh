#!/usr/bin/env bash
# Installs AWS's IoT Device SDK v2 for JavaScript (npm package aws-iot-device-sdk-v2, which ships
# its native binary) under .cache/aws-iot-sdk if it is not there, and prints that directory's
# node_modules path, for tests/e2e/test_aws_iot_sdk.py.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=.cache/aws-iot-sdk
version=1.28.0
if [ ! -d "$prefix/node_modules/aws-iot-device-sdk-v2" ] || [ "$(cat "$prefix/version" 2>/dev/null)" != "$version" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "aws-iot-device-sdk-v2@$version" >&2
  echo "$version" >"$prefix/version"
fi
echo "$PWD/$prefix/node_modules"
