#!/usr/bin/env bash
# The local demo behind `make run` / `make stop`: three sample backends, lbplane and one Envoy, all on
# loopback, started in the background with their logs and pids under .run/.
set -euo pipefail
cd "$(dirname "$0")/.."
# LBPLANE_DEMO_RUN_DIR, LBPLANE_DEMO_BIN and LBPLANE_DEMO_PORT_OFFSET (added to every port) let a test run a
# second demo beside one already running.
RUN="${LBPLANE_DEMO_RUN_DIR:-$PWD/.run}"
BIN="${LBPLANE_DEMO_BIN:-$PWD/bin}"
OFF="${LBPLANE_DEMO_PORT_OFFSET:-0}"
ENVOY="$(hack/tools.sh path-envoy)"
BACKEND_PORTS=($((18081 + OFF)) $((18082 + OFF)) $((18083 + OFF)))
XDS=127.0.0.1:$((18000 + OFF))
API=127.0.0.1:$((18001 + OFF))
METRICS=127.0.0.1:$((18002 + OFF))
STATS=$((19001 + OFF))
LISTENER=$((10080 + OFF))

stop() {
  [ -f "$RUN/pids" ] || return 0
  while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$RUN/pids"
  sleep 0.5
  while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < "$RUN/pids"
  # Envoy stops with its supervisor (PR_SET_PDEATHSIG); its own pid is there should it linger.
  [ -f "$RUN/envoy.pid" ] && kill "$(cat "$RUN/envoy.pid")" 2>/dev/null || true
  rm -f "$RUN/pids" "$RUN/envoy.pid" "$RUN/supervise.pid"
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
  # Its data directory (the CA key, the tokens), Envoy's key and admin socket: this user's only.
  mkdir -p "$RUN" && chmod 700 "$RUN"
  for p in "${BACKEND_PORTS[@]}" "${XDS#*:}" "${API#*:}" "${METRICS#*:}" "$STATS" "$LISTENER"; do
    port_free "$p" || { echo "port $p on 127.0.0.1 is in use; the demo needs it (make stop, or free it)" >&2; exit 1; }
  done
  : > "$RUN/pids"
  for p in "${BACKEND_PORTS[@]}"; do
    "$BIN/lbplane-backend" --listen "127.0.0.1:$p" --name "backend-$p" < /dev/null > "$RUN/backend-$p.log" 2>&1 &
    echo $! >> "$RUN/pids"
  done
  # The sample backends run on this host: the demo re-admits their ports on loopback, which lbplane refuses by
  # default (a policy could otherwise reach anything listening on the Envoy's host), and nothing else there.
  "$BIN/lbplane" serve --data-dir "$RUN/data" --xds-address "$XDS" --api-address "$API" --metrics-address "$METRICS" \
    --allow-backend-cidrs "127.0.0.1:${BACKEND_PORTS[0]}-${BACKEND_PORTS[2]}" < /dev/null > "$RUN/lbplane.log" 2>&1 &
  echo $! >> "$RUN/pids"
  wait_for "lbplane" http_ok "http://$API/healthz"
  export LBPLANE_SERVER="http://$API" LBPLANE_TOKEN_FILE="$RUN/data/token"
  # xDS is mTLS with lbplane's own CA: lbctl asks lbplane for this node's certificate (24 h) and writes it to
  # $RUN/envoy-certs, which Envoy watches; re-running the same command renews it without a restart.
  # Envoy's admin is a Unix socket only this user may open ($RUN/envoy-admin.sock), not a port.
  "$BIN/lbctl" bootstrap --node-id demo-envoy --xds-address "$XDS" --admin-socket "$RUN/envoy-admin.sock" --stats-port "$STATS" \
    --out-dir "$RUN/envoy-certs" > "$RUN/envoy.yaml"
  # Envoy sets PR_SET_PDEATHSIG (SIGTERM) on itself: started by this script it would stop when the script
  # returns. Its parent is a supervisor in a session of its own (setsid), which outlives the script and
  # `make run`'s terminal, and forwards make stop's SIGTERM.
  setsid "$BIN/lbplane-supervise" --pid-file "$RUN/supervise.pid" --child-pid-file "$RUN/envoy.pid" --log "$RUN/envoy.log" -- \
    "$ENVOY" -c "$RUN/envoy.yaml" --use-dynamic-base-id --concurrency 1 -l warn < /dev/null > "$RUN/supervise.log" 2>&1 &
  echo $! >> "$RUN/pids"
  # The example listens on 10080; with a port offset the demo pushes a copy on its own port.
  sed -e "s/port: 10080\b/port: $LISTENER/" -e "s/port: 18081\b/port: ${BACKEND_PORTS[0]}/" \
    -e "s/port: 18082\b/port: ${BACKEND_PORTS[1]}/" -e "s/port: 18083\b/port: ${BACKEND_PORTS[2]}/" \
    examples/round-robin.yaml > "$RUN/policy.yaml"
  "$BIN/lbctl" push-config -f "$RUN/policy.yaml"
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
  wait_for "the requests in the policy's status" sh -c "\"$BIN/lbctl\" status demo -o json | grep -q '\"latencyP99Ms\"'"
  "$BIN/lbctl" status demo
  cat <<TEXT

Try it:
  curl -si http://127.0.0.1:$LISTENER/ | grep X-Backend
  export LBPLANE_SERVER=http://$API LBPLANE_TOKEN_FILE=$RUN/data/token
  bin/lbctl push-config -f examples/weighted-round-robin.yaml   # listens on :10081
  bin/lbctl get -o yaml
  bin/lbctl status demo; bin/lbctl explain demo; bin/lbctl diff -f examples/least-request.yaml
  curl -s http://$METRICS/metrics | grep ^lbplane_    # lbplane's metrics
  curl -s http://127.0.0.1:$STATS/stats/prometheus | head      # Envoy's, on its stats port
  bin/lbctl bootstrap --node-id demo-envoy --xds-address $XDS --out-dir $RUN/envoy-certs > /dev/null   # renew Envoy's certificate, no restart
  curl -s --unix-socket $RUN/envoy-admin.sock http://envoy/server_info | head   # Envoy's admin
logs: $RUN/   stop everything: make stop
TEXT
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: hack/demo.sh start|stop" >&2; exit 2 ;;
esac
