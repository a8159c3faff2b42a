#!/bin/bash
cd /work/main
run() { name=$1; shift; mkdir -p /tmp/l6/$name; { date -u; uptime; } > /tmp/l6/$name/uptime.txt; echo "go run ./bench/runner $*" > /tmp/l6/$name/command.txt; go run ./bench/runner "$@" -out /tmp/l6/$name > /tmp/l6/$name/stdout.txt 2> /tmp/l6/$name/stderr.txt; echo "rc=$?" >> /tmp/l6/$name/uptime.txt; { date -u; uptime; } >> /tmp/l6/$name/uptime.txt; }
run push2 -only controlplane -apis delta -kube-policies none -policies 10,10000 -swarm 10 -changes 100 -reps 1 -cp-port-offset 3000 -cp-trace /tmp/l6/push2-trace
run push3 -only controlplane -apis delta -kube-policies none -policies 10,10000 -swarm 10 -changes 100 -reps 1 -cp-port-offset 3000 -cp-trace /tmp/l6/push3-trace
run churn2 -only churn -churn-policies 1000 -churn-rate 100 -churn-duration 60s
run kube2 -only controlplane -apis delta -policies 10 -swarm 10 -changes 50 -kube-apis delta -kube-policies 10,10000 -cp-port-offset 2500
echo done > /tmp/l6/ALLDONE2
