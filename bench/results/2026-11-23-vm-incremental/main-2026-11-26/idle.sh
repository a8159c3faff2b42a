#!/bin/bash
# Runs on merged main, the machine otherwise idle (after the CI run).
cd /work/main
heaps() { # port dir: a heap profile of lbplane every 45 s while the runner runs
  mkdir -p $2; while sleep 45; do curl -s -m 20 -o $2/heap-$(date -u +%H%M%S).pb.gz http://127.0.0.1:$1/debug/pprof/heap || true; done; }
heaps 32803 /work/l7/kube100k/heaps & h=$!
/work/l7/run.sh kube100k -only controlplane -apis delta -policies 10 -kube-apis delta -kube-policies 10,100000 -cp-groups 10 -swarm 10 -changes 50 -reps 1 -cp-port-offset 4400 -cpu-profile-dir /work/l7/kube100k/prof
kill $h
heaps 32603 /work/l7/push100k/heaps & h=$!
/work/l7/run.sh push100k -only controlplane -apis delta -kube-policies none -policies 10,100000 -cp-groups 10 -swarm 10 -changes 50 -reps 1 -cp-port-offset 4200 -cpu-profile-dir /work/l7/push100k/prof
kill $h
/work/l7/run.sh push10k -only controlplane -apis delta -kube-policies none -policies 10,10000 -swarm 10 -changes 100 -reps 1 -cp-port-offset 3000 -cp-trace /work/l7/push10k/trace
/work/l7/run.sh cold100k-used -only coldstart -cold-policies 100000 -cold-cluster-stats used -cp-port-offset 3800
/work/l7/run.sh cold100k-g10-used -only coldstart -cold-policies 100000 -cold-groups 10 -cold-cluster-stats used -cp-port-offset 3800
echo done > /work/l7/IDLE-DONE
