#!/usr/bin/env bash
# DynamoDB write throughput on one fresh DynamoDB Local, 32 concurrent writers throughout:
# raw conditional PutItem (the baseline), a raw two-item transaction,
# engine reports in-process, and shadowd end-to-end (wrk -t2 -c32) in both layouts with history
# on, off and `stream` (on a table with a stream: history written from it by the same shadowd,
# whose catch-up after the writes stop is reported). Every workload writes 2,048 distinct
# items, created before it is timed. Prints a Markdown table of rates and ratios to the baseline.
# Usage: bench/dynamodb_bench.sh [seconds per run]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
seconds="${1:-5}"
build=build/default
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; scripts/dynamodb-local.sh stop "$dir"; rm -rf "$dir"' EXIT
scripts/dynamodb-local.sh start "$dir"
endpoint=$(cat "$dir/endpoint")
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1
results="$dir/results"
bench() { "$build/bench/bench_dynamodb" "$endpoint" "$@"; }
table() {  # create|delete NAME [stream]: a table in the documented layout, without a stream unless asked
  python3 - "$endpoint" "$@" <<'PY'
import sys, boto3
endpoint, action, name = sys.argv[1:4]
c = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
if action == "delete":
    c.delete_table(TableName=name)
else:
    stream = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}} if sys.argv[4:] else {}
    c.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **stream,
                   AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("PK", "SK", "GSI1PK", "GSI1SK")],
                   KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                   GlobalSecondaryIndexes=[{"IndexName": "GSI1", "KeySchema": [{"AttributeName": "GSI1PK", "KeyType": "HASH"},
                                            {"AttributeName": "GSI1SK", "KeyType": "RANGE"}],
                                            "Projection": {"ProjectionType": "KEYS_ONLY"}}])
PY
}

metric() {  # URL NAME: the value of one sample of shadowd's /metrics (0 when absent)
  curl -s "$1/metrics" | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'
}

shadowd_run() {  # layout history(on|off|stream): reports to 2 × 1,024 things, after a warm-up pass over them
  local name="http-$1-$2" log="$dir/shadowd-$1-$2.log" history
  case "$2" in on) history=true ;; off) history=false ;; *) history=stream ;; esac
  table create "$name" $([ "$2" = stream ] && echo stream)
  "$build/shadowd" --listen 127.0.0.1:0 --store "dynamodb:$name" --dynamodb-endpoint "$endpoint" \
    --layout "$1" --history "$history" 2>"$log" &
  local pid=$! port
  port=$(port_of "$log")
  local url="http://127.0.0.1:$port"
  wrk -t2 -c32 -d"${seconds}s" -s bench/wrk_report.lua "$url" -- 1024 >/dev/null
  wrk -t2 -c32 -d"${seconds}s" --latency -s bench/wrk_report.lua "$url" -- 1024 >"$dir/wrk.out"
  local note=""
  if [ "$2" = stream ]; then  # how long the history written from the stream takes to catch up
    local writes caught="" start=$SECONDS
    writes=$(metric "$url" 'shadowd_store_operation_duration_seconds_count{operation="write"}')
    for _ in $(seq 600); do
      [ "$(metric "$url" shadowd_stream_writes_total)" -ge "$writes" ] && caught=$((SECONDS - start)) && break
      sleep 0.2
    done
    note="history of all $writes writes caught up ${caught:-(not within 120)} s after they stopped"
  fi
  kill "$pid"
  wait "$pid" || true
  table delete "$name"  # DynamoDB Local slows down as its in-memory data grows
  awk -v name="shadowd:$1:$2" -v note="$note" '/Requests\/sec/ {rate=$2} / 50%/ {p50=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$NF}
       END {print name, rate, p50, p99, (bad ? bad " non-2xx; " : "") note}' "$dir/wrk.out"
}

# DynamoDB Local drifts during a run, so a baseline run comes before and after every workload
# and each workload is compared with the mean of its two neighbours.
bench "$seconds" 32 put transact engine:separate:on engine:combined:off >/dev/null  # warms the JVM up
bench "$seconds" 32 put transact put engine:separate:on put engine:separate:off put engine:combined:on put \
  engine:combined:off put engine:combined:feed put >>"$results"
for layout in separate combined; do
  for history in on off; do
    shadowd_run "$layout" "$history" >>"$results"
    bench "$seconds" 32 put >>"$results"
  done
done
# Tables with a stream come last, compared with raw PutItem to a table with a stream: DynamoDB
# Local spends much more on every write to one, and keeps slowing down as stream records pile up.
BENCH_STREAM=1 bench "$seconds" 32 put >>"$results"
for layout in separate combined; do
  shadowd_run "$layout" stream >>"$results"
  BENCH_STREAM=1 bench "$seconds" 32 put >>"$results"
done

python3 - "$results" <<'PY'
import sys
rows = [line.strip().split(maxsplit=4) for line in open(sys.argv[1]) if line.strip()]
print("| workload | writes/s | ratio to PutItem | p50 | p99 |\n|---|---|---|---|---|")
for base, table in (("put", "a table without a stream"), ("put-stream", "a table with a stream")):
    puts = [float(r[1]) for r in rows if r[0] == base]
    print(f"| raw conditional PutItem to {table} (baseline; median of {len(puts)} runs, "
          f"{min(puts):,.0f}–{max(puts):,.0f}) | {sorted(puts)[len(puts) // 2]:,.0f} | 1.00 | | |")
for i, r in enumerate(rows):
    if r[0].startswith("put"):
        continue
    base = "put-stream" if r[0].endswith(":stream") else "put"
    before = next(float(p[1]) for p in reversed(rows[:i]) if p[0] == base)
    after = next(float(p[1]) for p in rows[i + 1:] if p[0] == base)
    rate = float(r[1])
    if r[0] == "transact":
        label = "raw TransactWriteItems: conditional Put + history Put"
    else:
        who, layout, history = r[0].split(":")
        shown = "stream's write alone (no history item, the event on the item; table without a stream)" if history == "feed" else history
        label = f"{'engine in-process' if who == 'engine' else '**shadowd end-to-end**'}, {layout} layout, history {shown}"
    p50, p99 = (r[2], r[3]) if len(r) > 3 else ("", "")
    extra = f" ({r[4]})" if len(r) > 4 else ""
    print(f"| {label}{extra} | {rate:,.0f} | {2 * rate / (before + after):.2f} | {p50} | {p99} |")
PY
