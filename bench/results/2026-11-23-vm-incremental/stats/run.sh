#!/bin/bash
# Alternating cold starts at 20,000 policies, one Envoy, --cluster-stats all and used.
cd "$(dirname "$0")/../../../.."
R=bench/results/2026-11-23-vm-incremental/stats
go build -o /tmp/stats-runner ./bench/runner || exit 1
for run in ${RUNS:-all-1 used-1 used-2 all-2}; do
  mode=${run%-*}
  out=$R/cold$((${N:-20000}/1000))k-$run
  mkdir -p $out
  cmd="go run ./bench/runner -only coldstart -cold-policies ${N:-20000} -cold-cluster-stats $mode -cp-port-offset 3800 -out $out"
  echo "$cmd" > $out/command.txt
  { date -u; uptime; } > $out/uptime-before.txt
  /tmp/stats-runner -only coldstart -cold-policies ${N:-20000} -cold-cluster-stats $mode -cp-port-offset 3800 -out $out > $out/stdout.txt 2> $out/stderr.txt
  echo "exit $?" >> $out/stdout.txt
  { date -u; uptime; } > $out/uptime-after.txt
done
