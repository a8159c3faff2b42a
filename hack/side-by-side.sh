#!/usr/bin/env bash
# side-by-side.sh NAME COMMAND [NAME COMMAND ...]: runs the commands at once, each line of their output
# prefixed with "[NAME] ", waits for all of them, prints how long each took, and fails if any failed.
# `make test` runs test-go's tests and test-cluster this way: both mostly wait (on Envoys, timers and pods),
# so side by side they take little longer than the longer of the two.
#
# A failed command's output can be many thousand lines, and a CI log is often read from its end: the last
# lines name each failed test with its own last lines (where `go test` puts the error that ended it).
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
    bash -c "$cmd" 2>&1 | tee "$dir/$i.out" | sed -u "s/^/[$name] /"
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
# failures NAME FILE: each "--- FAIL" of go test's output with the last three file:line lines of its own
# block (the lines indented under it, leaving out the process logs a failed test dumps), each "panic:" and
# "FAIL <package>" line, and each "*** [target]" of make; at most 40 lines.
failures() {
  awk -v name="$1" '
    function flush() { if (head != "") { print "[" name "] " head; for (k = 0; k < n; k++) print "[" name "] " tail[k] } head = ""; n = 0 }
    function indent(s) { match(s, /^[ \t]*/); return RLENGTH }
    /--- FAIL: / { flush(); head = $0; depth = indent($0); next }
    head != "" && indent($0) > depth {
      if ($0 ~ /^[ \t]*[A-Za-z0-9_.-]+\.go:[0-9]+: / && $0 !~ /: --- .* \(last [0-9]+ bytes\)$/) {
        if (n == 3) { tail[0] = tail[1]; tail[1] = tail[2]; n = 2 }
        tail[n++] = substr($0, 1, 300)
      }
      next
    }
    { flush() }
    /^panic: |^FAIL\t|\*\*\* \[/ { print "[" name "] " substr($0, 1, 300) }
    END { flush() }
  ' "$2" | head -n 40
}
for i in "${!names[@]}"; do
  read -r code secs <"$dir/$i" 2>/dev/null || { code=interrupted secs=?; }
  if [ "$code" = 0 ]; then
    echo "${names[$i]}: passed in $((secs / 60))m$((secs % 60))s"
  else
    echo "${names[$i]}: FAILED (exit $code) after ${secs}s; what failed:"
    failures "${names[$i]}" "$dir/$i.out"
    rc=1
  fi
done
exit $rc
