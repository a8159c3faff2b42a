#!/bin/bash
# RSS of `lbplane serve --xds-insecure` with 1,000 policies from a --config-dir, no Envoy connected, read
# from /proc/PID/status after 25 s (as 5.6.4 measured it). Usage: rss1000.sh BINARY LABEL [N]
bin=$1; label=$2; n=${3:-1000}
d=$(mktemp -d /tmp/mem/rss.XXXX); mkdir -p $d/policies
python3 - "$d/policies" "$n" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
for start in range(0, n, 1000):
    with open(f"{d}/p-{start:06d}.yaml", "w") as f:
        for i in range(start, min(n, start + 1000)):
            f.write(f"---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {{name: fill-{i}}}\nspec:\n"
                    f"  listener: {{address: 127.0.0.1, port: 29431, protocol: HTTP, hostnames: [fill-{i}.bench.local]}}\n"
                    f"  backends: [{{name: app, endpoints: [{{address: 127.0.0.1, port: 29491}}]}}]\n")
PY
$bin serve --data-dir $d/data --xds-address 127.0.0.1:0 --api-address 127.0.0.1:0 --token bench --api-rate-limit 0 \
  --proxy-stats-interval 0 --xds-insecure --config-dir $d/policies > $d/log 2>&1 &
pid=$!
sleep 25
echo "$label $n policies: $(grep -E 'VmRSS|RssAnon|RssFile' /proc/$pid/status | tr -s ' \t\n' ' ')"
kill $pid; wait $pid 2>/dev/null
tail -3 $d/log | cut -c1-200; rm -rf $d
