package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

const crdName = "loadbalancerpolicies.lbplane.io"

// crdNames are lbplane's CRDs, which the chart installs (crds/) or renders (crds.templated).
var crdNames = []string{crdName, "backendloadbalancerpolicies.lbplane.io"}

// kubectlJSON runs kubectl get ... -o json and decodes the answer.
func kubectlJSON(t *testing.T, kubeconfig string, out any, args ...string) {
	t.Helper()
	got, err := kubectl(t, kubeconfig, "", append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		t.Fatalf("kubectl get %v: %v\n%s", args, err, got)
	}
	if err := json.Unmarshal([]byte(got), out); err != nil {
		t.Fatalf("kubectl get %v: %v", args, err)
	}
}

// deleteCRD removes the CRDs kubetest.Start installed, for tests of how the chart installs them.
func deleteCRD(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	if out, err := kubectl(t, c.Kubeconfig, "", append(append([]string{"delete", "crd"}, crdNames...), "--wait=true", "--timeout=60s")...); err != nil {
		t.Fatalf("deleting the test cluster's CRDs: %v\n%s", err, out)
	}
}

// installServiceMonitorCRD applies prometheus-operator's ServiceMonitor CRD (hack/tools.sh
// servicemonitor-crd) and waits until the API server serves it.
func installServiceMonitorCRD(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	dir := tools.Path("servicemonitor-crd")
	if _, err := os.Stat(filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml")); err != nil {
		t.Fatalf("the ServiceMonitor CRD is not at %s: run hack/tools.sh servicemonitor-crd (make tools)", dir)
	}
	if out, err := kubectl(t, c.Kubeconfig, "", "apply", "--server-side", "-f", dir); err != nil {
		t.Fatalf("applying the ServiceMonitor CRD: %v\n%s", err, out)
	}
	// kubectl wait fails at once, instead of waiting, while the API server has not written the CRDs' first
	// status (".status.conditions accessor error" on a busy machine): it is asked again until they are served.
	eventually(t, 60*time.Second, "the ServiceMonitor and PrometheusRule CRDs are established", func() error {
		if out, err := kubectl(t, c.Kubeconfig, "", "wait", "--for=condition=Established", "--timeout=30s", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// TestHelmInstallEveryValue installs the chart with every scheduling, disruption, autoscaling, metrics and
// CRD value set (testdata/all-values.yaml) into a real API server, which validates each object against
// its schema (the ServiceMonitors against prometheus-operator's CRD), and reads back what was created.
func TestHelmInstallEveryValue(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	installServiceMonitorCRD(t, c)
	deleteCRD(t, c)
	// crds.templated: the CRD comes from the templates, so crds/ is skipped.
	out, err := helm(t, "install", "demo", chartDir, "-n", "lbplane", "--create-namespace", "--kubeconfig", c.Kubeconfig,
		"--skip-crds", "-f", allValues)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}

	type podSpec struct {
		NodeSelector              map[string]string `json:"nodeSelector"`
		Tolerations               []map[string]any  `json:"tolerations"`
		Affinity                  map[string]any    `json:"affinity"`
		ImagePullSecrets          []map[string]any  `json:"imagePullSecrets"`
		TerminationGracePeriod    *int              `json:"terminationGracePeriodSeconds"`
		TopologySpreadConstraints []struct {
			LabelSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"labelSelector"`
		} `json:"topologySpreadConstraints"`
		Containers []struct {
			Name      string   `json:"name"`
			Args      []string `json:"args"`
			Lifecycle struct {
				PreStop struct {
					HTTPGet *struct {
						Path string
						Port int
					} `json:"httpGet"`
					Exec *struct{ Command []string } `json:"exec"`
				} `json:"preStop"`
			} `json:"lifecycle"`
			StartupProbe   map[string]any `json:"startupProbe"`
			ReadinessProbe struct {
				HTTPGet struct{ Path string } `json:"httpGet"`
			} `json:"readinessProbe"`
			LivenessProbe struct {
				HTTPGet struct {
					Path string
					Port any
				} `json:"httpGet"`
				Exec *struct{ Command []string } `json:"exec"`
			} `json:"livenessProbe"`
		} `json:"containers"`
	}
	type deployment struct {
		Spec struct {
			Replicas *int `json:"replicas"`
			Template struct {
				Metadata struct {
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var lb, envoy deployment
	kubectlJSON(t, c.Kubeconfig, &lb, "deployment", "-n", "lbplane", "demo-lbplane")
	kubectlJSON(t, c.Kubeconfig, &envoy, "deployment", "-n", "lbplane", "demo-lbplane-envoy")
	for name, d := range map[string]deployment{"lbplane": lb, "envoy": envoy} {
		s := d.Spec.Template.Spec
		if s.NodeSelector["kubernetes.io/os"] != "linux" || len(s.Tolerations) != 1 || len(s.Affinity) != 1 ||
			len(s.ImagePullSecrets) != 1 || len(s.TopologySpreadConstraints) != 1 {
			t.Errorf("%s: scheduling not as set: %+v", name, s)
		}
		if len(s.TopologySpreadConstraints) == 1 && s.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "demo" {
			t.Errorf("%s: the spread constraint does not select the release's pods: %+v", name, s.TopologySpreadConstraints[0])
		}
		if d.Spec.Template.Metadata.Labels["example.com/tier"] == "" || d.Spec.Template.Metadata.Annotations["example.com/team"] == "" {
			t.Errorf("%s: pod labels/annotations not set: %v %v", name, d.Spec.Template.Metadata.Labels, d.Spec.Template.Metadata.Annotations)
		}
	}
	// The user's annotation wins over the chart's scrape annotation.
	if a := lb.Spec.Template.Metadata.Annotations["prometheus.io/scrape"]; a != "false" {
		t.Errorf("lbplane's prometheus.io/scrape: %q, want the value's false", a)
	}
	lc := lb.Spec.Template.Spec.Containers[0]
	if lc.StartupProbe == nil || lc.ReadinessProbe.HTTPGet.Path != "/readyz" || lc.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("lbplane probes: startup %v readiness %q liveness %q", lc.StartupProbe, lc.ReadinessProbe.HTTPGet.Path, lc.LivenessProbe.HTTPGet.Path)
	}
	ec := envoy.Spec.Template.Spec.Containers[0]
	// Nothing runs in Envoy's image: its liveness asks envoy-sidecar, which asks admin on its socket (admin
	// answers while Envoy waits for lbplane; no listener does), and its preStop hook waits for the drain there.
	if ec.ReadinessProbe.HTTPGet.Path != "/ready" || ec.LivenessProbe.HTTPGet.Path != "/envoy/alive" || fmt.Sprint(ec.LivenessProbe.HTTPGet.Port) != "19002" ||
		ec.LivenessProbe.Exec != nil {
		t.Errorf("Envoy probes: readiness %q liveness %+v", ec.ReadinessProbe.HTTPGet.Path, ec.LivenessProbe)
	}
	if h := ec.Lifecycle.PreStop.HTTPGet; h == nil || h.Path != "/shutdown" || h.Port != 19002 || ec.Lifecycle.PreStop.Exec != nil {
		t.Errorf("Envoy preStop: %+v", ec.Lifecycle.PreStop)
	}
	if cs := envoy.Spec.Template.Spec.Containers; len(cs) != 2 || cs[1].Name != "envoy-sidecar" ||
		!strings.Contains(strings.Join(cs[1].Args, " "), "envoy-sidecar --admin-socket /run/envoy/admin.sock --listen :19002 --drain-time 10s --wait-time 20s") {
		t.Errorf("envoy-sidecar: %+v", cs)
	}
	// drain 10 s + wait 20 s + 5 s.
	if g := envoy.Spec.Template.Spec.TerminationGracePeriod; g == nil || *g != 35 {
		t.Errorf("Envoy terminationGracePeriodSeconds: %v, want 35", g)
	}

	// The objects each value turns on, as the API server holds them.
	for _, obj := range []string{
		"poddisruptionbudget/demo-lbplane", "poddisruptionbudget/demo-lbplane-envoy",
		"horizontalpodautoscaler/demo-lbplane-envoy",
		"service/demo-lbplane-metrics", "service/demo-lbplane-envoy-metrics",
		"servicemonitor.monitoring.coreos.com/demo-lbplane", "servicemonitor.monitoring.coreos.com/demo-lbplane-envoy",
	} {
		if out, err := kubectl(t, c.Kubeconfig, "", "get", "-n", "lbplane", obj); err != nil {
			t.Errorf("%s: %v %s", obj, err, out)
		}
	}
	// The values that fit the chart to a cluster: priority, extra arguments, environment and volumes, and the
	// Envoy Service's load balancer settings, as the API server holds them.
	type extras struct {
		Spec struct {
			Template struct {
				Spec struct {
					PriorityClassName string           `json:"priorityClassName"`
					Volumes           []map[string]any `json:"volumes"`
					Containers        []struct {
						Args         []string         `json:"args"`
						Env          []map[string]any `json:"env"`
						VolumeMounts []map[string]any `json:"volumeMounts"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var lbx, envoyx extras
	kubectlJSON(t, c.Kubeconfig, &lbx, "deployment", "-n", "lbplane", "demo-lbplane")
	kubectlJSON(t, c.Kubeconfig, &envoyx, "deployment", "-n", "lbplane", "demo-lbplane-envoy")
	for name, x := range map[string]struct {
		d              extras
		priority, arg  string
		env, mountPath string
	}{"lbplane": {lbx, "lbplane-control", "--proxy-stats-interval=5s", "GOMEMLIMIT", "/scratch"},
		"envoy": {envoyx, "lbplane-edge", "--concurrency", "ENVOY_EXTRA", "/scratch"}} {
		s := x.d.Spec.Template.Spec
		if s.PriorityClassName != x.priority {
			t.Errorf("%s: priorityClassName %q, want %q", name, s.PriorityClassName, x.priority)
		}
		ct := s.Containers[0]
		if !slices.Contains(ct.Args, x.arg) {
			t.Errorf("%s: extraArgs missing %q: %q", name, x.arg, ct.Args)
		}
		if !slices.ContainsFunc(ct.Env, func(e map[string]any) bool { return e["name"] == x.env }) {
			t.Errorf("%s: extraEnv missing %s: %v", name, x.env, ct.Env)
		}
		if !slices.ContainsFunc(ct.VolumeMounts, func(m map[string]any) bool { return m["mountPath"] == x.mountPath }) ||
			!slices.ContainsFunc(s.Volumes, func(v map[string]any) bool { return v["name"] == "scratch" }) {
			t.Errorf("%s: extra volume not mounted: %v %v", name, ct.VolumeMounts, s.Volumes)
		}
	}
	var svc struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
			Labels      map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			ExternalTrafficPolicy    string   `json:"externalTrafficPolicy"`
			InternalTrafficPolicy    string   `json:"internalTrafficPolicy"`
			LoadBalancerClass        string   `json:"loadBalancerClass"`
			LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges"`
		} `json:"spec"`
	}
	kubectlJSON(t, c.Kubeconfig, &svc, "service", "-n", "lbplane", "demo-lbplane-envoy")
	if svc.Metadata.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" || svc.Metadata.Labels["example.com/exposed"] != "true" ||
		svc.Spec.ExternalTrafficPolicy != "Local" || svc.Spec.InternalTrafficPolicy != "Cluster" || svc.Spec.LoadBalancerClass != "example.com/lb" ||
		!slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"198.51.100.0/24"}) {
		t.Errorf("Envoy Service: %+v", svc)
	}
	var pr struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string } `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	kubectlJSON(t, c.Kubeconfig, &pr, "prometheusrule.monitoring.coreos.com", "-n", "lbplane", "demo-lbplane")
	alerts := map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = r.Expr
			}
		}
	}
	if pr.Metadata.Labels["release"] != "kube-prometheus-stack" || len(pr.Spec.Groups) != 2 || len(alerts) != 14 ||
		!strings.Contains(alerts["LbplaneEndpointsEjected"], "> 0.25") {
		t.Errorf("PrometheusRule: %+v", pr)
	}
	var pdb struct {
		Spec struct {
			MaxUnavailable any `json:"maxUnavailable"`
		} `json:"spec"`
	}
	kubectlJSON(t, c.Kubeconfig, &pdb, "pdb", "-n", "lbplane", "demo-lbplane-envoy")
	if pdb.Spec.MaxUnavailable != "25%" {
		t.Errorf("Envoy PDB maxUnavailable: %v", pdb.Spec.MaxUnavailable)
	}
	var sm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Endpoints []struct{ Port, Path, Interval string } `json:"endpoints"`
		} `json:"spec"`
	}
	kubectlJSON(t, c.Kubeconfig, &sm, "servicemonitor.monitoring.coreos.com", "-n", "lbplane", "demo-lbplane-envoy")
	if sm.Metadata.Labels["release"] != "kube-prometheus-stack" || len(sm.Spec.Endpoints) != 1 ||
		sm.Spec.Endpoints[0].Port != "stats" || sm.Spec.Endpoints[0].Path != "/stats/prometheus" || sm.Spec.Endpoints[0].Interval != "15s" {
		t.Errorf("Envoy ServiceMonitor: %+v", sm)
	}
	checkPlatformValues(t, c)

	// The templated CRD belongs to the release and is kept on uninstall.
	var crd struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	kubectlJSON(t, c.Kubeconfig, &crd, "crd", crdName)
	if crd.Metadata.Annotations["meta.helm.sh/release-name"] != "demo" || crd.Metadata.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("templated CRD annotations: %v", crd.Metadata.Annotations)
	}
	if out, err := helm(t, "uninstall", "demo", "-n", "lbplane", "--kubeconfig", c.Kubeconfig); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if out, err := kubectl(t, c.Kubeconfig, "", "get", "crd", crdName); err != nil {
		t.Errorf("helm uninstall removed the kept CRD: %v %s", err, out)
	}
}

// crdHasField tells whether the served CRD's schema has spec.<field>.
func crdHasField(t *testing.T, kubeconfig, field string) bool {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "crd", crdName, "-o",
		"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties."+field+".type}")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	return strings.TrimSpace(out) != ""
}

// TestHelmCRDUpgrade follows docs/kubernetes-reference.md "Upgrading the CRDs" against a real API server: a release installed
// from a chart whose CRD lacks a field (crds/, which helm upgrade never touches) is upgraded to this chart
// with crds.templated=true after the documented adoption, and the API server then serves the new schema: a
// policy keeps the field instead of having it pruned.
func TestHelmCRDUpgrade(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	deleteCRD(t, c)
	const field = "proxyGroup"
	// The "old" chart: this one with spec.proxyGroup missing from the CRD's schema.
	old := filepath.Join(t.TempDir(), "lbplane")
	if out, err := exec.Command("cp", "-r", chartDir, old).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	crdFile := filepath.Join(old, "crds", "lbplane.io_loadbalancerpolicies.yaml")
	b, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	version := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	specProps := version["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	if _, ok := specProps[field]; !ok {
		t.Fatalf("the chart's CRD has no spec.%s to take out", field)
	}
	delete(specProps, field)
	if b, err = yaml.Marshal(crd); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(crdFile, b, 0o644)

	common := []string{"-n", "lbplane", "--kubeconfig", c.Kubeconfig, "--set", "apiToken=t", "--set", "metrics.service.enabled=false"}
	if out, err := helm(t, append([]string{"install", "demo", old, "--create-namespace"}, common...)...); err != nil {
		t.Fatalf("helm install (old chart): %v\n%s", err, out)
	}
	if crdHasField(t, c.Kubeconfig, field) {
		t.Fatal("the old chart's CRD already has the field")
	}
	// A plain upgrade leaves the CRD as it was: helm never updates crds/.
	if out, err := helm(t, append([]string{"upgrade", "demo", chartDir}, common...)...); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if crdHasField(t, c.Kubeconfig, field) {
		t.Fatal("a plain helm upgrade changed the CRD; the test's premise is wrong")
	}

	// docs/kubernetes-reference.md "Upgrading the CRDs": hand the CRDs to the release, then upgrade with
	// crds.templated=true.
	for _, args := range [][]string{
		append(append([]string{"label", "crd"}, crdNames...), "app.kubernetes.io/managed-by=Helm", "--overwrite"),
		append(append([]string{"annotate", "crd"}, crdNames...), "meta.helm.sh/release-name=demo", "meta.helm.sh/release-namespace=lbplane", "--overwrite"),
	} {
		if out, err := kubectl(t, c.Kubeconfig, "", args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	if out, err := helm(t, append([]string{"upgrade", "demo", chartDir, "--set", "crds.templated=true"}, common...)...); err != nil {
		t.Fatalf("helm upgrade --set crds.templated=true: %v\n%s", err, out)
	}
	if !crdHasField(t, c.Kubeconfig, field) {
		t.Fatal("after the templated upgrade the CRD still lacks the field")
	}
	// The API server uses the new schema: the field is kept, not pruned as unknown.
	eventually(t, 30*time.Second, "a policy with spec.proxyGroup keeps it", func() error {
		out, err := kubectl(t, c.Kubeconfig, `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: upgraded, namespace: default}
spec:
  proxyGroup: edge
  listener: {port: 8080, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 10.0.0.1, port: 80}]}]
`, "apply", "-f", "-")
		if err != nil {
			return &textErr{out}
		}
		got, _ := kubectl(t, c.Kubeconfig, "", "get", "lbp", "-n", "default", "upgraded", "-o", "jsonpath={.spec.proxyGroup}")
		if strings.TrimSpace(got) != "edge" {
			kubectl(t, c.Kubeconfig, "", "delete", "lbp", "-n", "default", "upgraded")
			return &textErr{"spec.proxyGroup was pruned: " + got}
		}
		return nil
	})
	// Later upgrades keep applying it.
	if out, err := helm(t, append([]string{"upgrade", "demo", chartDir, "--set", "crds.templated=true"}, common...)...); err != nil {
		t.Fatalf("second templated upgrade: %v\n%s", err, out)
	}
}

type textErr struct{ s string }

func (e *textErr) Error() string { return e.s }

// jsonpath reads one field of an object as the API server holds it.
func jsonpath(t *testing.T, kubeconfig, ns, obj, path string) string {
	t.Helper()
	out, err := kubectl(t, kubeconfig, "", "get", "-n", ns, obj, "-o", "jsonpath="+path)
	if err != nil {
		t.Fatalf("kubectl get %s %s: %v\n%s", obj, path, err, out)
	}
	return strings.TrimSpace(out)
}

// checkPlatformValues installs a second release with testdata/platform-values.yaml into namespace edge of
// the same API server, which validates every object, and reads back what each of those values set.
func checkPlatformValues(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	out, err := helm(t, "install", "demo", chartDir, "-n", "edge", "--create-namespace", "--kubeconfig", c.Kubeconfig,
		"--skip-crds", "-f", platformValues)
	if err != nil {
		t.Fatalf("helm install with %s: %v\n%s", platformValues, err, out)
	}
	kc := c.Kubeconfig
	for _, tc := range []struct{ obj, path, want string }{
		// fullnameOverride names every object; nameOverride is the name label; part-of stays lbplane (lbctl
		// finds it by that); commonLabels are on every object and pod.
		{"daemonset/edge-lb-envoy", "{.metadata.labels['app\\.kubernetes\\.io/name']}", "lb"},
		{"service/edge-lb-xds", "{.metadata.labels['app\\.kubernetes\\.io/part-of']}", "lbplane"},
		{"service/edge-lb-xds", "{.metadata.labels.team}", "edge"},
		{"daemonset/edge-lb-envoy", "{.spec.template.metadata.labels.cost-center}", "42"},
		{"deployment/edge-lb", "{.spec.template.metadata.labels.team}", "edge"},
		// Pinned images.
		{"deployment/edge-lb", "{.spec.template.spec.containers[0].image}", "ghcr.io/lbplane/lbplane:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.containers[0].image}", "envoyproxy/envoy:distroless-v1.40.0@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.containers[1].image}", "ghcr.io/lbplane/lbplane:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		// A DaemonSet on the nodes' network, and the update strategies.
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.hostNetwork}", "true"},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.dnsPolicy}", "ClusterFirstWithHostNet"},
		{"daemonset/edge-lb-envoy", "{.spec.updateStrategy.rollingUpdate.maxUnavailable}", "1"},
		{"deployment/edge-lb", "{.spec.strategy.rollingUpdate.maxSurge}", "1"},
		{"deployment/edge-lb", "{.spec.strategy.rollingUpdate.maxUnavailable}", "0"},
		// Envoy's security context: the capability added where asked, the chart's settings kept beside it;
		// envoy-sidecar keeps the chart's own.
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.containers[0].securityContext.capabilities.add}", `["NET_BIND_SERVICE"]`},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem}", "true"},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.containers[1].securityContext.capabilities}", `{"drop":["ALL"]}`},
		{"daemonset/edge-lb-envoy", "{.spec.template.spec.securityContext.supplementalGroups}", "[2000]"},
		// The Envoy Service's addresses and protocols.
		{"service/edge-lb-envoy", "{.spec.loadBalancerIP}", "198.51.100.10"},
		{"service/edge-lb-envoy", "{.spec.externalIPs}", `["198.51.100.11"]`},
		{"service/edge-lb-envoy", "{.spec.ipFamilyPolicy}", "PreferDualStack"},
		{"service/edge-lb-envoy", "{.spec.ports[*].appProtocol}", "http https"},
		// NetworkPolicies: the API from ops, metrics from monitoring; the stats port from lbplane and monitoring.
		{"networkpolicy/edge-lb", "{.spec.ingress[1].from[0].namespaceSelector.matchLabels}", `{"kubernetes.io/metadata.name":"ops"}`},
		{"networkpolicy/edge-lb-envoy", "{.spec.ingress[1].ports[0].port}", "19001"},
		// lbplane keeps the Envoy Service's ports.
		{"deployment/edge-lb", "{.spec.template.spec.containers[0].args}", "--envoy-service=edge-lb-envoy"},
	} {
		got := jsonpath(t, kc, "edge", tc.obj, tc.path)
		if tc.path == "{.spec.template.spec.containers[0].args}" {
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s %s: %s, want it to contain %s", tc.obj, tc.path, got, tc.want)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.obj, tc.path, got, tc.want)
		}
	}
}

// TestHelmInstallGatewayAPI installs the chart with gatewayAPI.enabled and its CRDs into a real API server,
// under a long release name and namespace, which validates the GatewayClass against Gateway API's schema
// (its description takes at most 64 bytes: a longer one failed helm install on the one-node cluster).
func TestHelmInstallGatewayAPI(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	ns, release := "lbplane-gateway-api-conformance", "lbplane-gateway-api-conformance"
	if out, err := helm(t, "install", release, chartDir, "-n", ns, "--create-namespace", "--kubeconfig", c.Kubeconfig,
		"--set", "gatewayAPI.enabled=true"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	var gc struct {
		Spec struct {
			ControllerName string `json:"controllerName"`
			Description    string `json:"description"`
		} `json:"spec"`
	}
	kubectlJSON(t, c.Kubeconfig, &gc, "gatewayclass", "lbplane")
	if gc.Spec.ControllerName != "lbplane.io/gateway-controller" || gc.Spec.Description == "" || len(gc.Spec.Description) > 64 {
		t.Errorf("GatewayClass spec %+v", gc.Spec)
	}
}
