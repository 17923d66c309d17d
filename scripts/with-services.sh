#!/usr/bin/env bash
# Runs a command with the services the tests use started, and stops them afterwards:
# DynamoDB Local (DS_DYNAMODB_ENDPOINT), moto_server for SQS and SNS (DS_MOTO_ENDPOINT) and a
# Mosquitto broker (DS_MQTT_URL). DS_REQUIRE_* tells the tests that each must be there (a test
# fails, not skips, without it). Dummy AWS credentials: neither emulator checks signatures.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'scripts/dynamodb-local.sh stop "$dir/dynamodb"; scripts/moto.sh stop "$dir/moto"; scripts/mosquitto.sh stop "$dir/mqtt"; rm -rf "$dir"' EXIT
scripts/dynamodb-local.sh start "$dir/dynamodb"
scripts/moto.sh start "$dir/moto"
scripts/mosquitto.sh start "$dir/mqtt"
export DS_DYNAMODB_ENDPOINT DS_REQUIRE_DYNAMODB=1 DS_MOTO_ENDPOINT DS_REQUIRE_MOTO=1 DS_MQTT_URL DS_REQUIRE_MQTT=1
DS_DYNAMODB_ENDPOINT=$(cat "$dir/dynamodb/endpoint")
DS_MOTO_ENDPOINT=$(cat "$dir/moto/endpoint")
DS_MQTT_URL=$(cat "$dir/mqtt/url")
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1
"$@"
