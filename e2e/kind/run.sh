#!/usr/bin/env bash
# The kind path, for users with Docker: create a kind cluster, build the lbplane image with Docker (the
# Dockerfile) and the test's other images with hack/images, load them, and run the same chart test as
# `make test-cluster` (e2e/cluster: helm install, backends, a policy, traffic from a pod and from the host, k6
# through Envoy, nginx and HAProxy, faults under load).
#   e2e/kind/run.sh          # create, load, test
#   e2e/kind/run.sh delete   # remove the cluster
set -euo pipefail
cd "$(dirname "$0")/../.."
KIND=${KIND:-$(command -v kind || echo kind)}
if [ "${1:-}" = delete ]; then exec "$KIND" delete cluster --name lbplane; fi
docker info >/dev/null 2>&1 || { echo "a running Docker engine is required" >&2; exit 1; }

"$KIND" get clusters | grep -qx lbplane || "$KIND" create cluster --config e2e/kind/kind-config.yaml
docker build -t ghcr.io/lbplane/lbplane:dev .
"$KIND" load docker-image ghcr.io/lbplane/lbplane:dev --name lbplane
images=$(mktemp -d)
trap 'rm -rf "$images"' EXIT
go run ./hack/images -out "$images" -only envoy,k6,nginx,haproxy,client
for f in "$images"/*.tar; do "$KIND" load image-archive "$f" --name lbplane; done

# kind-config.yaml maps the node's port 30080 to 127.0.0.1:30080 on this machine: the Envoy Service's NodePort.
KUBECONFIG=$(mktemp)
"$KIND" get kubeconfig --name lbplane > "$KUBECONFIG"
export KUBECONFIG LBPLANE_CLUSTER_NODE_ADDRESS=127.0.0.1 LBPLANE_CLUSTER_HELM_SET='envoy.service.ports[0].nodePort=30080'
go test -tags cluster -race -count=1 -timeout 30m -v ./e2e/cluster
