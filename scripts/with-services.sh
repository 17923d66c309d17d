#!/usr/bin/env bash
# Runs a command with the services the tests use (DynamoDB Local) started, and stops them
# afterwards. Exports DS_DYNAMODB_ENDPOINT and dummy AWS credentials for DynamoDB Local.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'scripts/dynamodb-local.sh stop "$dir"; rm -rf "$dir"' EXIT
scripts/dynamodb-local.sh start "$dir"
export DS_DYNAMODB_ENDPOINT DS_REQUIRE_DYNAMODB=1
DS_DYNAMODB_ENDPOINT=$(cat "$dir/endpoint")
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1
"$@"
