#!/usr/bin/env bash
# The kind path, for users with Docker: create a cluster, build and load the lbplane image, install the chart,
# deploy three sample backends and a policy, run a k6 load test as a Job in the cluster, and print its QPS
# and p99. It cannot run on machines without a container engine (the test suite skips it and says so).
#   e2e/kind/run.sh          # create, install, test
#   e2e/kind/run.sh delete   # remove the cluster
set -euo pipefail
cd "$(dirname "$0")/../.."
HELM=${HELM:-$(command -v helm || hack/tools.sh path-helm)}
KIND=${KIND:-$(command -v kind || echo kind)}
if [ "${1:-}" = delete ]; then exec "$KIND" delete cluster --name lbplane; fi
docker info >/dev/null 2>&1 || { echo "a running Docker engine is required" >&2; exit 1; }

"$KIND" get clusters | grep -qx lbplane || "$KIND" create cluster --config e2e/kind/kind-config.yaml
docker build -t ghcr.io/lbplane/lbplane:dev .
"$KIND" load docker-image ghcr.io/lbplane/lbplane:dev --name lbplane
docker pull envoyproxy/envoy:v1.40.0 && "$KIND" load docker-image envoyproxy/envoy:v1.40.0 --name lbplane
"$HELM" upgrade --install lbplane charts/lbplane -n lbplane --create-namespace \
  --set image.tag=dev --set image.pullPolicy=Never --set envoy.image.pullPolicy=Never \
  --set envoy.service.type=NodePort --set 'envoy.service.ports[0].name=http' --set 'envoy.service.ports[0].port=80' \
  --set 'envoy.service.ports[0].targetPort=10080' --set 'envoy.service.ports[0].nodePort=30080' --wait
kubectl apply -f e2e/kind/backends.yaml
kubectl wait --for=condition=Available deployment/demo-backend --timeout=120s
kubectl wait lbp/demo --for=jsonpath='{.status.conditions[?(@.type=="Programmed")].status}'=True --timeout=120s
kubectl get lbp
echo "curl http://127.0.0.1:30080/ goes through Envoy:"; curl -s -D - -o /dev/null http://127.0.0.1:30080/ | grep -i x-backend || true

kubectl delete job k6 --ignore-not-found
kubectl apply -f e2e/kind/k6-job.yaml
kubectl wait --for=condition=Complete job/k6 --timeout=180s || kubectl wait --for=condition=Failed job/k6 --timeout=5s || true
kubectl logs job/k6 | grep '^{"qps"' | python3 -c '
import json, sys
s = json.loads(sys.stdin.readline())
q, p99, failed = s["qps"], s["p99"], s["failed"]
print(f"QPS {q:.0f}, p99 {p99:.1f} ms, failed {failed * 100:.2f} %")'
