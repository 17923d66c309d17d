# Shared by the benchmark scripts that start servers: source it after `cd` to the project root.

# Waits for "listening address=…:PORT" in a server's log file (which may not exist yet) and
# prints PORT.
port_of() {
  for _ in $(seq 100); do
    p=$(sed -n 's/.*listening address=[0-9.]*:\([0-9]*\).*/\1/p' "$1" 2>/dev/null | head -1 || true)
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.1
  done
  echo "server did not start" >&2; exit 1
}
