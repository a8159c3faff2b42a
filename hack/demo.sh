#!/usr/bin/env bash
# The local demo behind `make run` / `make stop`: three sample backends, lbplane and one Envoy, all on
# loopback, started in the background with their logs and pids under .run/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN="$PWD/.run"
BIN="$PWD/bin"
ENVOY="$(hack/tools.sh path-envoy)"
BACKEND_PORTS=(18081 18082 18083)
XDS=127.0.0.1:18000
API=127.0.0.1:18001
ADMIN=19000
LISTENER=10080

stop() {
  [ -f "$RUN/pids" ] || return 0
  while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$RUN/pids"
  sleep 0.5
  while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < "$RUN/pids"
  rm -f "$RUN/pids"
  echo "stopped the demo"
}

port_free() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
# Go and Envoy listen with SO_REUSEADDR, so a port left in TIME_WAIT by the last demo is free to them too.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}

wait_for() { # description, command...
  local what=$1; shift
  for _ in $(seq 1 150); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for $what; logs are in $RUN/" >&2
  exit 1
}

http_ok() {
  python3 - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

start() {
  stop >/dev/null
  mkdir -p "$RUN"
  for p in "${BACKEND_PORTS[@]}" 18000 18001 18002 "$ADMIN" 19001 "$LISTENER"; do
    port_free "$p" || { echo "port $p on 127.0.0.1 is in use; the demo needs it (make stop, or free it)" >&2; exit 1; }
  done
  : > "$RUN/pids"
  for p in "${BACKEND_PORTS[@]}"; do
    "$BIN/lbplane-backend" --listen "127.0.0.1:$p" --name "backend-$p" > "$RUN/backend-$p.log" 2>&1 &
    echo $! >> "$RUN/pids"
  done
  "$BIN/lbplane" serve --data-dir "$RUN/data" --xds-address "$XDS" --api-address "$API" > "$RUN/lbplane.log" 2>&1 &
  echo $! >> "$RUN/pids"
  wait_for "lbplane" http_ok "http://$API/healthz"
  export LBPLANE_SERVER="http://$API" LBPLANE_TOKEN_FILE="$RUN/data/token"
  # xDS is mTLS with lbplane's own CA: lbctl asks lbplane for this node's certificate (24 h) and writes it to
  # $RUN/envoy-certs, which Envoy watches; re-running the same command renews it without a restart.
  "$BIN/lbctl" bootstrap --node-id demo-envoy --xds-address "$XDS" --admin-port "$ADMIN" --out-dir "$RUN/envoy-certs" > "$RUN/envoy.yaml"
  "$ENVOY" -c "$RUN/envoy.yaml" --use-dynamic-base-id --concurrency 1 -l warn > "$RUN/envoy.log" 2>&1 &
  echo $! >> "$RUN/pids"
  "$BIN/lbctl" push-config -f examples/round-robin.yaml
  wait_for "Envoy to serve :$LISTENER" http_ok "http://127.0.0.1:$LISTENER/"
  # lbplane reads endpoint health and load from Envoy's stats port every 2s: let it take a first reading,
  # so that the requests below show in the policy's status.
  wait_for "a first reading of Envoy's stats" sh -c "\"$BIN/lbctl\" status demo -o json | grep -q '\"backends\"'"
  echo
  echo "300 requests through Envoy on 127.0.0.1:$LISTENER:"
  python3 - "$LISTENER" <<'PY'
import collections, http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
counts = collections.Counter()
for _ in range(300):
    conn.request("GET", "/")
    r = conn.getresponse()
    r.read()
    counts[f"{r.getheader('X-Backend')} (HTTP {r.status})"] += 1
for k in sorted(counts):
    print(f"  {k}: {counts[k]}")
PY
  echo
  "$BIN/lbctl" get
  echo
  "$BIN/lbctl" status
  echo
  wait_for "the requests in the policy's status" sh -c "\"$BIN/lbctl\" status demo -o json | grep -q '\"latencyP99\"'"
  "$BIN/lbctl" status demo
  cat <<TEXT

Try it:
  curl -si http://127.0.0.1:$LISTENER/ | grep X-Backend
  export LBPLANE_SERVER=http://$API LBPLANE_TOKEN_FILE=$RUN/data/token
  bin/lbctl push-config -f examples/weighted-round-robin.yaml   # listens on :10081
  bin/lbctl get -o yaml
  bin/lbctl status demo; bin/lbctl explain demo; bin/lbctl diff -f examples/least-request.yaml
  curl -s http://127.0.0.1:18002/metrics | grep ^lbplane_    # lbplane's metrics
  curl -s http://127.0.0.1:19001/stats/prometheus | head      # Envoy's, on its stats port
  bin/lbctl bootstrap --node-id demo-envoy --out-dir $RUN/envoy-certs > /dev/null   # renew Envoy's certificate, no restart
Envoy admin: http://127.0.0.1:$ADMIN   logs: $RUN/   stop everything: make stop
TEXT
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: hack/demo.sh start|stop" >&2; exit 2 ;;
esac
