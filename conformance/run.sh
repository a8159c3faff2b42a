#!/usr/bin/env bash
# The Gateway API conformance suite on the one-node cluster of hack/cluster (docs/conformance.md):
#   conformance/run.sh [suite flags]              # sudo make conformance: starts the cluster when it is not
#                                                 # running (and stops it afterwards), else uses it
#   conformance/run.sh --on-cluster [suite flags] # the running cluster only, with the images make cluster
#                                                 # just built and the suite's (make test-cluster's step)
# Installs the Gateway API CRDs (standard channel) and the chart with gatewayAPI.enabled=true, runs
# TestGatewayAPIConformance (GATEWAY-HTTP: core and the extended features lbplane claims, conformance/options.go,
# unless the flags say otherwise, e.g. -run-test=HTTPRouteSimpleSameNamespace), writes the report under
# conformance/reports/, removes the release, and exits non-zero when a test fails. Needs root, as make cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
NAMESPACE=lbplane-conformance
RELEASE=lbplane-conformance
log() { echo "conformance: $*" >&2; }
die() { echo "conformance: $*" >&2; exit 1; }

on_cluster=
if [ "${1:-}" = --on-cluster ]; then on_cluster=1; shift; fi
[ "$(id -u)" = 0 ] || die "needs root, as make cluster: sudo make conformance"

hack/tools.sh helm kubectl
helm=$(hack/tools.sh path-helm)
kubectl=$(hack/tools.sh path-kubectl)
export KUBECONFIG
KUBECONFIG=$(hack/cluster/cluster.sh kubeconfig)
kc() { "$kubectl" "$@"; }

if [ -f "$KUBECONFIG" ] && kc get --raw /readyz >/dev/null 2>&1; then
  if [ -n "$on_cluster" ]; then
    log "using the running cluster and the images make cluster built; building and importing the suite's"
    hack/cluster/cluster.sh images -only echo-basic,conformance-coredns
  else
    log "using the running cluster; rebuilding and importing the images (unchanged ones are kept)"
    hack/cluster/cluster.sh images -conformance
  fi
elif [ -n "$on_cluster" ]; then
  die "no cluster answers at $KUBECONFIG (make cluster starts one)"
else
  log "no cluster is running: starting one (make cluster), stopped again at the end"
  trap 'hack/cluster/cluster.sh down' EXIT
  hack/cluster/cluster.sh up >/dev/null
  hack/cluster/cluster.sh images -only echo-basic,conformance-coredns
fi

# The CRDs: the chart's copy (make generate copies them, without the admission policy file, from the module
# version go.mod pins), applied so that a cluster with older ones gets these (helm install leaves existing CRDs).
crds=charts/lbplane/crds/gateway-api
files=()
for f in "$crds"/gateway.networking.k8s.io_*.yaml; do
  [ -f "$f" ] || die "no Gateway API CRDs in $crds (make generate copies them)"
  files+=(-f "$f")
done
log "installing the Gateway API CRDs from $crds"
kc apply --server-side --force-conflicts "${files[@]}" >/dev/null
kc wait --for=condition=Established --timeout=60s "${files[@]}" >/dev/null

release_down() {
  "$helm" uninstall "$RELEASE" -n "$NAMESPACE" --ignore-not-found --wait --timeout 2m >/dev/null 2>&1 || true
  kc delete namespace "$NAMESPACE" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
}
# A release an earlier run left would serve with the image it started with.
release_down
log "installing the chart in $NAMESPACE with gatewayAPI.enabled=true"
# NodePort: nothing on the one-node cluster gives a LoadBalancer Service an address, and helm --wait would wait
# for one until its timeout (the Gateways' own Services are lbplane's, ClusterIP).
"$helm" install "$RELEASE" charts/lbplane -n "$NAMESPACE" --create-namespace --wait --timeout 5m \
  --set image.tag=dev --set envoy.image.repository=lbplane.local/envoy --set envoy.image.tag=v1.40.0 \
  --set gatewayAPI.enabled=true --set envoy.service.type=NodePort ||
  { kc get pods -A -o wide >&2 || true; die "helm install of the chart with gatewayAPI.enabled=true failed (above)"; }

log "running the suite (go test -tags conformance in conformance/)"
rc=0
(cd conformance && go test -tags conformance -count=1 -timeout 90m -v -run '^TestGatewayAPIConformance$' . -args "$@") || rc=$?
if [ "$rc" != 0 ]; then
  kc get pods -A -o wide >&2 || true
  for c in control-plane envoy; do
    kc -n "$NAMESPACE" logs -l "app.kubernetes.io/component=$c" --tail=40 --all-containers --prefix >&2 || true
  done
fi
release_down
if [ "$rc" = 0 ]; then log "passed"; else log "FAILED (exit $rc): the suite's output is above"; fi
exit "$rc"
