#!/bin/bash
# usage: run.sh N OUTDIR BINDIR [envoy extra args...]  ; env BOOTARGS for lbctl bootstrap extras; MAXSEC
N=$1; OUT=$2; BIN=$3; shift 3
MAXSEC=${MAXSEC:-600}
ENVOY=/work/wt/envoy/.cache/tools/envoy-1.40.0/envoy
B=25840; XDS=127.0.0.1:$B; API=127.0.0.1:$((B+1)); ADMIN=$((B+3)); LPORT=25831; BPORT=25891
rm -rf $OUT; mkdir -p $OUT/policies $OUT/data
for ((from=0; from<N; from+=1000)); do
  to=$((from+1000)); [ $to -gt $N ] && to=$N
  awk -v f=$from -v t=$to -v p=$LPORT -v b=$BPORT 'BEGIN{for(i=f;i<t;i++){printf "---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: c-%d}\nspec:\n  listener: {address: 127.0.0.1, port: %d, protocol: HTTP, hostnames: [c-%d.bench.local]}\n  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: %s}]}]\n", i, p, i, b}}' > $OUT/policies/p-$(printf %06d $from).yaml
done
$BIN/lbctl bootstrap --node-id bench-cold --xds-address $XDS --xds-insecure --admin-port $ADMIN --stats-port 0 --max-connections 10000 $BOOTARGS > $OUT/envoy.yaml 2>$OUT/bootstrap.err || { cat $OUT/bootstrap.err; exit 1; }
[ -n "$EXTRAYAML" ] && printf "%s\n" "$EXTRAYAML" >> $OUT/envoy.yaml
$BIN/lbplane-backend --listen 127.0.0.1:$BPORT --name b0 --size 16 > $OUT/backend.log 2>&1 &
BEPID=$!
T0=$(date +%s.%N)
$BIN/lbplane serve --data-dir $OUT/data --xds-address $XDS --api-address $API --token bench --api-rate-limit 0 --proxy-stats-interval 0 --xds-insecure --config-dir $OUT/policies --metrics-address 127.0.0.1:$((B+2)) --pprof $LBARGS > $OUT/lbplane.log 2>&1 &
LBPID=$!
$ENVOY -c $OUT/envoy.yaml --concurrency 1 --use-dynamic-base-id -l warn "$@" > $OUT/envoy.log 2>&1 &
EPID=$!
echo "pids lb=$LBPID envoy=$EPID backend=$BEPID" > $OUT/pids
uptime > $OUT/uptime-start
last=$((N-1)); served=""
while true; do
  now=$(date +%s.%N); el=$(echo "$now - $T0" | bc); ei=$(printf "%.0f" $el)
  code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 -H "Host: c-$last.bench.local" http://127.0.0.1:$LPORT/ 2>/dev/null)
  lbps=$(ps -o rss=,times= -p $LBPID | tr -s ' '); eps=$(ps -o rss=,times= -p $EPID | tr -s ' ')
  echo "t=$el code=$code lb(rssKiB,cpu)=$lbps envoy(rssKiB,cpu)=$eps" >> $OUT/poll.log
  if [ $(( $ei % 5 )) -eq 0 ]; then
    { echo "== t=$el"; curl -s -m 3 "http://127.0.0.1:$ADMIN/stats?filter=^(control_plane|cluster_manager|server\.memory|server\.state|overload|listener_manager|http\.mgr|overload\.envoy\.resource_monitors)" ; } >> $OUT/stats.log 2>&1
  fi
  if [ "$code" = "200" ] && [ -z "$served" ]; then served=$el; echo "SERVED at $el" >> $OUT/poll.log; fi
  if [ -n "$served" ]; then
    st=$(curl -s -m 5 -H 'Authorization: Bearer bench' http://$API/v1/proxies)
    if echo "$st" | grep -q '"SYNCED"\|"state":"Synced"\|SYNCED'; then echo "SYNCED at $el" >> $OUT/poll.log; echo "$st" > $OUT/proxies.json; break; fi
  fi
  if [ $ei -ge $MAXSEC ]; then echo "GAVE UP at $el" >> $OUT/poll.log; break; fi
  sleep 1
done
curl -s -m 10 "http://127.0.0.1:$ADMIN/stats" > $OUT/stats-final.txt
curl -s -m 10 "http://127.0.0.1:$ADMIN/memory" > $OUT/memory-final.json
curl -s -m 10 "http://127.0.0.1:$ADMIN/server_info" > $OUT/server_info.json
uptime > $OUT/uptime-end
kill $EPID $LBPID $BEPID; wait 2>/dev/null
tail -3 $OUT/poll.log
