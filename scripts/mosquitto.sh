#!/usr/bin/env bash
# A Mosquitto broker on a free port of 127.0.0.1 with a generated config, for the MQTT target.
#   scripts/mosquitto.sh start DIR [PORT]   starts it; writes DIR/url (mqtt://127.0.0.1:PORT) and DIR/pid
#   scripts/mosquitto.sh stop DIR
# Tests restart the broker on the same port by calling start again with that PORT; sessions
# and queued messages are kept in DIR across a stop (SIGTERM) and start.
set -euo pipefail
cd "$(dirname "$0")/.."
action="$1" dir="$2"
case "$action" in
  start)
    port="${3:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    mkdir -p "$dir"
    cat >"$dir/mosquitto.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous true
persistence true
persistence_location $dir/
max_queued_messages 100000
max_inflight_messages 0
set_tcp_nodelay true
CONF
    mosquitto -c "$dir/mosquitto.conf" >"$dir/mosquitto.log" 2>&1 &
    echo $! >"$dir/pid"
    for _ in $(seq 100); do
      if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
        echo "mqtt://127.0.0.1:$port" >"$dir/url"; exit 0
      fi
      sleep 0.1
    done
    echo "mosquitto did not start:" >&2; cat "$dir/mosquitto.log" >&2; exit 1 ;;
  stop)
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null || true ;;
  *) echo "usage: $0 start|stop DIR [PORT]" >&2; exit 2 ;;
esac
