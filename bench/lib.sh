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

# Prints a free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# nginx_conf DIR PORT [DIRECTIVE...]: writes DIR/nginx.conf for one nginx worker answering
# `return 200` on 127.0.0.1:PORT, every path it writes under DIR (no root needed); each
# DIRECTIVE (such as "master_process off;") goes at its top. Run it with
# nginx -p DIR -c DIR/nginx.conf -e DIR/error.log.
nginx_conf() {
  local dir=$1 port=$2
  shift 2
  mkdir -p "$dir"
  {
    [ $# -eq 0 ] || printf '%s\n' "$@"
    cat <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  server { listen 127.0.0.1:$port; location / { return 200; } }
}
EOF
  } >"$dir/nginx.conf"
}
