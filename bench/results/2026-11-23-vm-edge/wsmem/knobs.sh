#!/bin/bash
# one knob at a time against the lbplane-shaped baseline
W=go run ./bench/wsmem
run() { label=$1; shift; echo "# $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >&2; $W -conns 1000 -label "$label" "$@"; }
run baseline
run buffer-16k -buffer 16384
run buffer-8k -buffer 8192
run buffer-envoy-default-1MiB -buffer 0
run tcp-proxy -mode tcp
run tcp-proxy-buffer-8k -mode tcp -buffer 8192
run tls -tls
run tcp-proxy-tls -mode tcp -tls
run concurrency-2 -concurrency 2
run no-stream-idle -stream-idle ""
run stream-idle-off -stream-idle 0s
run no-conn-idle -conn-idle ""
run no-headers-timeout -headers-timeout ""
run no-stats -no-stats
run access-log -access-log
run not-hardened -hardened=false
run no-overload -overload=false
run no-dynamic-stats -dynamic-stats=false
run legacy-http-parser -runtime envoy.reloadable_features.http1_use_balsa_parser=false
