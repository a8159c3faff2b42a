#!/usr/bin/env bash
# side-by-side.sh NAME COMMAND [NAME COMMAND ...]: runs the commands at once, each line of their output
# prefixed with "[NAME] ", waits for all of them, prints how long each took, and fails if any failed.
# `make test` runs test-go's tests and test-cluster this way: both mostly wait (on Envoys, timers and pods),
# so side by side they take little longer than the longer of the two.
set -uo pipefail
if [ $# -eq 0 ] || [ $(($# % 2)) -ne 0 ]; then
  echo "usage: $0 NAME COMMAND [NAME COMMAND ...]" >&2
  exit 2
fi
names=() pids=() results=()
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
i=0
while [ $# -gt 0 ]; do
  name=$1 cmd=$2
  shift 2
  (
    start=$SECONDS
    bash -c "$cmd" 2>&1 | sed -u "s/^/[$name] /"
    rc=${PIPESTATUS[0]}
    echo "$rc $((SECONDS - start))" >"$dir/$i"
    exit "$rc"
  ) &
  names+=("$name") pids+=($!)
  i=$((i + 1))
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || rc=1
done
for i in "${!names[@]}"; do
  read -r code secs <"$dir/$i" 2>/dev/null || { code=interrupted secs=?; }
  if [ "$code" = 0 ]; then
    echo "${names[$i]}: passed in $((secs / 60))m$((secs % 60))s"
  else
    echo "${names[$i]}: FAILED (exit $code) after ${secs}s"
    rc=1
  fi
done
exit $rc
