#!/usr/bin/env bash
# DynamoDB throughput on one fresh DynamoDB Local: raw PutItem and raw transactions (the
# baselines) and engine reports (bench_dynamodb), then shadowd end-to-end with wrk.
# Usage: bench/dynamodb_bench.sh [seconds per run]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
build=build/default
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; scripts/dynamodb-local.sh stop "$dir"; rm -rf "$dir"' EXIT
scripts/dynamodb-local.sh start "$dir"
endpoint=$(cat "$dir/endpoint")
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1

"$build/bench/bench_dynamodb" "$endpoint" 3 8 on >/dev/null  # warm the JVM up first
echo "| workload (8 threads) | writes/s | ratio to PutItem |"
echo "|---|---|---|"
"$build/bench/bench_dynamodb" "$endpoint" "$seconds" 8 on
"$build/bench/bench_dynamodb" "$endpoint" "$seconds" 8 off | tail -1

table=bench-http-$$
python3 - "$endpoint" "$table" <<'PY'
import sys, boto3
endpoint, table = sys.argv[1:3]
c = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
c.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
               AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("PK", "SK", "GSI1PK", "GSI1SK")],
               KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
               GlobalSecondaryIndexes=[{"IndexName": "GSI1", "KeySchema": [{"AttributeName": "GSI1PK", "KeyType": "HASH"},
                                        {"AttributeName": "GSI1SK", "KeyType": "RANGE"}], "Projection": {"ProjectionType": "KEYS_ONLY"}}])
PY
"$build/shadowd" --listen 127.0.0.1:0 --store "dynamodb:$table" --dynamodb-endpoint "$endpoint" 2>"$dir/shadowd.log" &
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening address=[0-9.]*:\([0-9]*\).*/\1/p' "$dir/shadowd.log" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
echo
echo "shadowd end-to-end (wrk -t2 -c32, reports to distinct shadows, history on):"
wrk -t2 -c32 -d"${seconds}s" --latency -s bench/wrk_report.lua "http://127.0.0.1:$port" | grep -E "Requests/sec|50%|99%|Non-2xx"
