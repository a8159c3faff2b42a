# lbplane: `make run` starts a local demo, `make test` runs every test. Tools are pinned in hack/tools.sh
# and installed into .cache/tools on first use.

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
# The release: lbctl version, lbplane_build_info, the chart's appVersion and the image tag all say this one.
VERSION := $(shell cat version/VERSION)
# The commit the binaries are built from (-dirty with uncommitted changes), stamped explicitly: Go's own VCS
# stamping is off wherever GOFLAGS has -buildvcs=false, as it has on these machines.
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell test -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" && echo -dirty)
LDFLAGS := -X github.com/lbplane/lbplane/version.revision=$(REVISION)

.PHONY: run stop test test-go go-tests stress tools build lint golden fuzz generate check-generated clean bench bench-quick cluster cluster-down images test-cluster conformance

# The e2e tests mostly wait on Envoy, backends and timers, so four run at once on two cores (11 minutes instead
# of 25); the connection floods take turns (e2e exclusive), and the tests on fixed demo ports run alone.
TEST_PARALLEL ?= 4

FUZZTIME ?= 10m
# Minimizing a new input is bounded by a count of runs, not a time: Go's minimizer is quadratic in the input's
# length, so a time bound is always reached on kilobyte YAML documents, and then the worker is killed, its work
# thrown away and the process restarted (a 15s run with -fuzzminimizetime=5s spent itself minimizing: 29 to
# 9,742 execs and 4 new inputs; with 200x: 11,232 to 12,892 execs and 55 to 60 new inputs).
FUZZMINIMIZE ?= 200x

## run: build, install the pinned Envoy only (the demo needs nothing else), start lbplane + Envoy + 3 sample backends on loopback, push examples/round-robin.yaml, show the spread
run: build
	@hack/tools.sh envoy
	@hack/demo.sh start

## stop: stop what `make run` started
stop:
	@hack/demo.sh stop

## test: the whole suite: the tools, lint and the generated files first, then test-go's tests and test-cluster
## (the chart on real pods, and the conformance suite; root) side by side, each line prefixed with its name: both
## mostly wait, on Envoys and timers or on pods. About 25 minutes warm.
test: tools lint check-generated
	@hack/side-by-side.sh go-tests "$(MAKE) --no-print-directory go-tests" test-cluster "$(MAKE) --no-print-directory test-cluster"

## test-go: gofmt, vet, staticcheck, generated files, every Go test under the race detector (real Envoy and
## backends on loopback, kube-apiserver and etcd, headless Chromium), and a short fuzz run
test-go: tools lint check-generated
	@$(MAKE) --no-print-directory go-tests

## go-tests: test-go's tests alone (its tools installed, lint and the generated files checked already)
go-tests:
	$(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout 40m ./...
	cd conformance && $(GO) test -count=1 .
	$(GO) test -run='^$$' -fuzz=FuzzTranslate -fuzztime=15s -fuzzminimizetime=$(FUZZMINIMIZE) ./controlplane/translate

## stress: the e2e and kubetest packages three times in a row while a background load keeps every core busy and churns loopback connections; report into bench/results/<date>-<host>-stress/ (about 45 minutes on two cores)
stress: tools
	$(GO) run ./hack/stresscheck

## bench: every benchmark (bench/README.md), results into bench/results/<date>-<host>/ (50 minutes on a two-core machine)
bench:
	@hack/tools.sh envoy bench etcd kube-apiserver
	$(GO) run ./bench/runner
	$(GO) run ./bench/summarize -w

## bench-quick: a reduced set in under 5 minutes, into bench/results/<date>-<host>-quick/
bench-quick:
	@hack/tools.sh envoy bench etcd kube-apiserver
	$(GO) run ./bench/runner -quick
	$(GO) run ./bench/summarize -w

## fuzz: a long fuzz run of decode -> validate -> translate -> build (FUZZTIME=10m by default)
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzTranslate -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./controlplane/translate

## tools: install the pinned Envoy, staticcheck, controller-gen, promtool, etcd, kube-apiserver (and kubectl if missing), helm and the cert-manager and ServiceMonitor CRDs into .cache/tools, and Debian's chromium (apt-get, root) for the dashboard test (re-used when present; kube-apiserver builds in about 5 minutes, once)
tools:
	@hack/tools.sh envoy staticcheck controller-gen promtool etcd kube-apiserver kubectl helm cert-manager-crds servicemonitor-crd chromium

## build: the binaries into ./bin
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

## lint: gofmt, go vet, staticcheck
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$$(hack/tools.sh path-staticcheck) ./...
	cd conformance && $(GO) vet -tags conformance ./... && $$(cd .. && hack/tools.sh path-staticcheck) -tags conformance ./...

## generate: deepcopy code, the CRD, the Gateway API CRDs (copied from the pinned module) and docs/policy-reference.md, from api/ (controller-gen, pinned; hack/apiref),
## and docs/chart-values.md from the chart's values.yaml (hack/chartvalues);
## allowDangerousTypes admits the float64 figures of the status: shares, rates and latency are numbers
generate:
	@hack/tools.sh controller-gen
	$$(hack/tools.sh path-controller-gen) object paths=./api/...
	$$(hack/tools.sh path-controller-gen) crd:allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=charts/lbplane/crds
	# The Gateway API CRDs (standard channel) of the module version go.mod pins, under crds/ so that one helm
	# install brings them with the GatewayClass (docs/gateway-api.md); the admission policy file is no CRD.
	rm -rf charts/lbplane/crds/gateway-api && mkdir -p charts/lbplane/crds/gateway-api
	gwdir=$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api) && for f in $$gwdir/config/crd/standard/gateway.networking.k8s.io_*.yaml; do \
	  case $$f in *_vap_*) ;; *) install -m 0644 $$f charts/lbplane/crds/gateway-api/ ;; esac; done
	$(GO) run ./hack/apiref
	$(GO) run ./hack/chartvalues
	$(GO) run ./cmd/lbctl bootstrap --node-id envoy --proxy-group placeholder-group --xds-address placeholder-xds.invalid:18000 --stats-address 0.0.0.0 --max-connections 100000 --admin-socket /run/envoy/admin.sock --xds-insecure > charts/lbplane/files/envoy-bootstrap.yaml
	$(GO) run ./cmd/lbctl bootstrap --node-id envoy --proxy-group placeholder-group --xds-address placeholder-xds.invalid:18000 --stats-address 0.0.0.0 --max-connections 100000 \
	  --admin-socket /run/envoy/admin.sock --xds-tls-dir /etc/envoy/tls > charts/lbplane/files/envoy-bootstrap-mtls.yaml
	# envoy.clusterStats=used: the chart swaps the bootstrap's stats_config section for the one --cluster-stats used renders.
	for m in all used; do $(GO) run ./cmd/lbctl bootstrap --node-id envoy --xds-insecure --max-connections 100000 --admin-socket /run/envoy/admin.sock --cluster-stats $$m | \
	  awk '/^stats_config:/ {p = 1; print; next} p && /^[^ ]/ {exit} p' > charts/lbplane/files/envoy-stats-$$m.yaml; done

## check-generated: fail when the generated files are not what make generate makes from api/
check-generated: generate
	@git diff --exit-code --stat -- api charts/lbplane/crds charts/lbplane/files docs/policy-reference.md docs/chart-values.md || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api charts/lbplane/crds charts/lbplane/files docs/policy-reference.md docs/chart-values.md); \
	  if [ -n "$$untracked" ]; then echo "generated files not committed: $$untracked"; exit 1; fi

## cluster: a one-node Kubernetes on this machine without Docker (root; docs/kubernetes.md): builds the pinned
## kubelet, controllers, kube-proxy and CoreDNS the first time, installs Debian's containerd, runc and CNI plugins,
## builds and imports the images; prints the KUBECONFIG line
cluster:
	@hack/cluster/cluster.sh up

## cluster-down: stop the cluster and undo everything it changed on the host (idempotent)
cluster-down:
	@hack/cluster/cluster.sh down

## images: the OCI image tarballs (lbplane from the Dockerfile's description, and the cluster's Envoy, k6, pause,
## CoreDNS, nginx, HAProxy, and the conformance suite's echo-basic and CoreDNS under the names its manifests use)
## into .run/cluster/images, without Docker; `make cluster` imports them
images:
	$(GO) run ./hack/images -out .run/cluster/images

# make test-cluster also runs the Gateway API conformance suite (GATEWAY-HTTP: core and lbplane's extended
# features) on the cluster it built, after the chart test; its failure fails test-cluster. CLUSTER_CONFORMANCE=0
# leaves it out.
CLUSTER_CONFORMANCE ?= 1
# Flags for the conformance suite (conformance/conformance_test.go), e.g. CONFORMANCE_FLAGS=-run-test=HTTPRouteWeight
# for one test (docs/conformance.md lists more).
CONFORMANCE_FLAGS ?=

## test-cluster: make cluster, the chart test on it (e2e/cluster), the Gateway API conformance suite (GATEWAY-HTTP
## core and extended) on the same cluster, then make cluster-down, whatever the result
test-cluster:
	@hack/cluster/cluster.sh up; rc=$$?; \
	  if [ $$rc = 0 ]; then KUBECONFIG=$$(hack/cluster/cluster.sh kubeconfig) $(GO) test -tags cluster -race -count=1 -timeout 30m -v ./e2e/cluster; rc=$$?; \
	    if [ "$(CLUSTER_CONFORMANCE)" = 1 ]; then conformance/run.sh --on-cluster $(CONFORMANCE_FLAGS) || rc=1; \
	    else echo "test-cluster: the Gateway API conformance suite was not run (CLUSTER_CONFORMANCE=0)"; fi; fi; \
	  hack/cluster/cluster.sh down; exit $$rc

## conformance: the Gateway API conformance suite, GATEWAY-HTTP core and extended (CONFORMANCE_FLAGS adds the suite's flags),
## on the make cluster cluster (started when not running and stopped after; root): the Gateway API CRDs, the chart
## with gatewayAPI.enabled=true, the suite, the report into conformance/reports/ (docs/conformance.md)
conformance:
	@conformance/run.sh $(CONFORMANCE_FLAGS)

## golden: regenerate both golden sets, policy → IR and IR → xDS (review the diff)
golden:
	$(GO) test ./controlplane/translate -run TestGoldenIR -update
	$(GO) test ./controlplane/xdsbuild -run TestGolden -update

clean: stop
	rm -rf $(BIN) .run
