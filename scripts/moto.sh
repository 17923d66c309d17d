#!/usr/bin/env bash
# moto_server (AWS service emulator: SQS, SNS) on a free port, for the notification targets.
#   scripts/moto.sh start DIR   starts it; writes DIR/endpoint and DIR/pid
#   scripts/moto.sh stop DIR
set -euo pipefail
cd "$(dirname "$0")/.."
action="$1" dir="$2"
case "$action" in
  start)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$dir"
    moto_server -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/pid"
    for _ in $(seq 150); do
      if curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/"; then echo "http://127.0.0.1:$port" >"$dir/endpoint"; exit 0; fi
      sleep 0.2
    done
    echo "moto_server did not start:" >&2; cat "$dir/moto.log" >&2; exit 1 ;;
  stop)
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
