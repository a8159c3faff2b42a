#!/bin/bash
# Alternating cold starts at N policies: main (bb4d2c6) then the memory change, same runner flags.
N=${N:-100000}
for round in ${ROUNDS_LIST:-1 2}; do
for v in base branch; do
  out=/tmp/mem/cold-$v-$N-r$round
  rm -rf $out; mkdir -p $out
  uptime > $out/uptime-before.txt
  (cd /tmp/mem/$v && go run ./bench/runner -only coldstart -cold-policies $N -out $out) > $out/runner.log 2>&1
  uptime > $out/uptime-after.txt
  echo "$v r$round: $(grep -h 'cold start' $out/runner.log)"
done
[ "$ROUNDS" = 1 ] && break
done
