#!/bin/bash
# Runs BenchmarkLoadHeapPerPolicy/100000 once at each commit given, one after the other, each from a git archive.
set -u
cd /work/wt/mem3
for c in "$@"; do
  d=/tmp/mem3/tree-$c
  if [ ! -d $d ]; then mkdir -p $d && git archive $c | tar -x -C $d && ln -s /work/main/.cache $d/.cache; fi
  echo "== $c $(git log -1 --format=%s $c | cut -c1-90)"
  echo "uptime before: $(uptime)"
  (cd $d && go test -run XXX -bench 'LoadHeapPerPolicy/100000' -benchtime 1x ./controlplane/configdir 2>&1 | grep -E "heapB|ok|FAIL")
  echo "uptime after: $(uptime)"
done
