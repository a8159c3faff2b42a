#!/bin/sh
# Polls the runner's kube-apiserver: LoadBalancerPolicy status writes (every write verb), every 5 s.
out=<run dir>/status-writes.tsv
echo "utc	status_writes	policies_with_status" > $out
for i in $(seq 1 400); do
  kc=$(ls -t /tmp/lbplane-bench-*/controlplane-kubernetes-delta*/kubeconfig /tmp/lbplane-bench-*/controlplane-kubernetes-delta*/*/kubeconfig 2>/dev/null | head -1)
  if [ -n "$kc" ]; then
    n=$(kubectl --kubeconfig "$kc" get --raw /metrics 2>/dev/null | grep '^apiserver_request_total{' | grep 'resource="loadbalancerpolicies"' | grep 'subresource="status"' | grep -v 'verb="GET"\|verb="LIST"\|verb="WATCH"' | awk '{s+=$NF} END {print s+0}')
    echo "$(date -u +%H:%M:%S)	$n" >> $out
  fi
  [ -f <run dir>/uptime-after.txt ] && break
  sleep 5
done
