#!/usr/bin/env bash
# CPU per change and memory per policy of the control plane, before and after a change: the same benchmarks of
# two commits, interleaved (before, after, before, after, ...) in one run on an otherwise idle machine,
# compared with benchstat. The results go to OUT (before.txt, after.txt, benchstat.txt, commits.txt, uptime).
#
#   bench/ab.sh OUT BEFORE_COMMIT AFTER_COMMIT
#
# Each commit's test binaries are built once (go test -c) in a temporary worktree; the runs then alternate.
set -euo pipefail
out=${1:?output folder} before=${2:?before commit} after=${3:?after commit}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/before" 2>/dev/null; git -C "$repo" worktree remove --force "$work/after" 2>/dev/null; rm -rf "$work"' EXIT
declare -A bench=(
  [engine]='EngineOneChangeAmong|UpdateKubernetesOneChangeAmong|HeapPerPolicy'
  [pushapi]='ApplyOneChangeAmong'
  [xdscache]='DeltaResponseOneChangeAmong'
)
for side in before after; do
  commit=${!side}
  git -C "$repo" worktree add -q --detach "$work/$side" "$commit"
  for p in "${!bench[@]}"; do
    (cd "$work/$side" && go test -c -o "$work/$side-$p.test" "./controlplane/$p")
  done
done
uptime > "$out/uptime-before.txt"
: > "$out/before.txt"; : > "$out/after.txt"
for round in 1 2 3 4 5; do
  for side in before after; do
    for p in engine pushapi xdscache; do
      (cd "$work/$side/controlplane/$p" && "$work/$side-$p.test" -test.run '^$' -test.bench "${bench[$p]}" -test.benchmem -test.count 1) \
        | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >> "$out/$side.txt"
    done
  done
done
uptime > "$out/uptime-after.txt"
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$out/before.txt" "$out/after.txt" > "$out/benchstat.txt"
printf 'before %s\nafter %s\n' "$(git -C "$repo" rev-parse "$before")" "$(git -C "$repo" rev-parse "$after")" > "$out/commits.txt"
cat "$out/benchstat.txt"
