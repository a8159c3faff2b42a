package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// A rolled-back policy's series say so: RolledBack True and Programmed False, and its rollout's phase and
// stage; a policy without a rollout has no rollout series. The series come in the order the policies are
// listed.
func TestPolicySeriesCarryTheRollout(t *testing.T) {
	m := New(nil)
	m.Policies(func() iter.Seq[PolicyConditions] {
		return slices.Values([]PolicyConditions{
			{Policy: types.NamespacedName{Namespace: "shop", Name: "cart"}, Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse, Reason: "RolledBack"},
				{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionTrue, Reason: v1alpha1.RolloutRolledBack}},
				Rollout: &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutRolledBack, Stage: 1, Stages: 3}},
			{Policy: types.NamespacedName{Namespace: "shop", Name: "web"}, Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: "Programmed"}}},
		})
	})
	want := `
# HELP lbplane_policy_condition Always 1: one series per policy and condition type (Accepted, ResolvedRefs, Programmed, and RolledBack once the policy had a staged rollout), labelled with its status and reason, as kube-state-metrics reports conditions.
# TYPE lbplane_policy_condition gauge
lbplane_policy_condition{condition="Programmed",name="cart",namespace="shop",reason="RolledBack",status="False"} 1
lbplane_policy_condition{condition="RolledBack",name="cart",namespace="shop",reason="RolledBack",status="True"} 1
lbplane_policy_condition{condition="Programmed",name="web",namespace="shop",reason="Programmed",status="True"} 1
# HELP lbplane_policy_rollout_stage The stage a policy's last staged rollout reached (from 1), labelled with its phase: Progressing, Paused, Succeeded, RolledBack or Aborted. Absent for a policy that never had one.
# TYPE lbplane_policy_rollout_stage gauge
lbplane_policy_rollout_stage{name="cart",namespace="shop",phase="RolledBack"} 1
# HELP lbplane_policy_rollout_stages How many stages a policy's last staged rollout has. Absent for a policy that never had one.
# TYPE lbplane_policy_rollout_stages gauge
lbplane_policy_rollout_stages{name="cart",namespace="shop"} 3
# HELP lbplane_policies Policies by condition type (Accepted, ResolvedRefs, Programmed, RolledBack), status and reason.
# TYPE lbplane_policies gauge
lbplane_policies{condition="Programmed",reason="Programmed",status="True"} 1
lbplane_policies{condition="Programmed",reason="RolledBack",status="False"} 1
lbplane_policies{condition="RolledBack",reason="RolledBack",status="True"} 1
`
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), "lbplane_policy_condition", "lbplane_policy_rollout_stage", "lbplane_policy_rollout_stages", "lbplane_policies"); err != nil {
		t.Error(err)
	}
}

// The policies' series follow the registries' in one text exposition, whatever format the scraper offers
// to take, compressed when it takes gzip, each family once, with label values escaped.
func TestPolicySeriesInOneExposition(t *testing.T) {
	m := New(nil)
	m.Policies(func() iter.Seq[PolicyConditions] {
		return slices.Values([]PolicyConditions{{Policy: types.NamespacedName{Namespace: "shop", Name: "cart"},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionFalse, Reason: "a \"quoted\" \\ reason\nsplit"}}}})
	})
	m.SourceChange(SourceStore, v1alpha1.Kind, 1)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	for _, accept := range []string{"", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3"} {
		for _, gz := range []bool{false, true} {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			// The transport asks for gzip and decompresses itself unless the request says otherwise.
			resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body io.Reader = resp.Body
			if got := resp.Header.Get("Content-Encoding"); (got == "gzip") != gz {
				t.Errorf("accept %q, gzip %v: Content-Encoding %q", accept, gz, got)
			} else if gz {
				if body, err = gzip.NewReader(resp.Body); err != nil {
					t.Fatal(err)
				}
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Errorf("accept %q: Content-Type %q", accept, ct)
			}
			parser := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := parser.TextToMetricFamilies(body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("accept %q, gzip %v: %v", accept, gz, err)
			}
			cond := fams["lbplane_policy_condition"]
			if cond == nil || len(cond.Metric) != 1 || fams["lbplane_source_changes_total"] == nil || fams["promhttp_metric_handler_requests_total"] == nil {
				t.Fatalf("accept %q, gzip %v: families %v", accept, gz, slices.Sorted(maps.Keys(fams)))
			}
			for _, l := range cond.Metric[0].Label {
				if l.GetName() == "reason" && l.GetValue() != "a \"quoted\" \\ reason\nsplit" {
					t.Errorf("the reason read back as %q", l.GetValue())
				}
			}
		}
	}
}

// lbplane_proxy_sync has one series per Envoy, its worst stream's state, and at most the bound: the Envoys
// that are not SYNCED are kept, the rest counted in lbplane_proxy_sync_omitted.
func TestProxySyncIsBoundedAndKeepsTheUnsynced(t *testing.T) {
	m := New(nil)
	list := []ProxySync{{Node: "e1", Group: "g", State: "SYNCED"}, {Node: "e2", Group: "g", State: "SYNCED"},
		{Node: "e3", Group: "g", State: "STALE"}, {Node: "e4", Group: "h", State: "NACKED"},
		// e2's second stream (delta beside state of the world) is behind: e2 is STALE.
		{Node: "e2", Group: "g", State: "STALE"}}
	m.ProxiesSync(func() []ProxySync { return list }, 3)
	want := `
# HELP lbplane_proxy_sync_omitted Envoys connected to this replica left out of lbplane_proxy_sync by its bound (--metrics-max-proxies), by sync state.
# TYPE lbplane_proxy_sync_omitted gauge
lbplane_proxy_sync_omitted{state="NACKED"} 0
lbplane_proxy_sync_omitted{state="STALE"} 0
lbplane_proxy_sync_omitted{state="SYNCED"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "lbplane_proxy_sync_omitted"); err != nil {
		t.Error(err)
	}
	got := map[string]string{}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "lbplane_proxy_sync" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["node"]] = l["group"] + "/" + l["state"]
		}
	}
	if fmt.Sprint(got) != "map[e2:g/STALE e3:g/STALE e4:h/NACKED]" {
		t.Errorf("lbplane_proxy_sync: %v", got)
	}
	if n := testutil.CollectAndCount(m.sync, "lbplane_proxy_sync"); n != 3 {
		t.Errorf("%d lbplane_proxy_sync series, want the bound, 3", n)
	}
}

// A proxy group's NACK series are there at 0 from its first snapshot, so that rate() sees the first NACK,
// and a NACK is counted on its group.
func TestNacksByProxyGroup(t *testing.T) {
	m := New(nil)
	m.KnownTypes("Cluster", "Listener")
	m.Snapshot("edge", 100, false)
	if v := testutil.ToFloat64(m.nacks.WithLabelValues("edge", "Listener")); v != 0 {
		t.Errorf("before any NACK: %v", v)
	}
	if n := testutil.CollectAndCount(m.nacks); n != 2 {
		t.Errorf("%d NACK series after group edge's first snapshot, want 2 (one per type)", n)
	}
	m.Answer("edge", "Listener", true, time.Now())
	m.Answer("edge", "Listener", false, time.Now())
	if v := testutil.ToFloat64(m.nacks.WithLabelValues("edge", "Listener")); v != 1 {
		t.Errorf("after one NACK: %v", v)
	}
	m.Group("other")
	if n := testutil.CollectAndCount(m.nacks); n != 4 {
		t.Errorf("%d NACK series after an Envoy of group other connected, want 4", n)
	}
}

// lbplane_cluster_info names each cluster's policy and backend once, even when two proxy groups serve it,
// in the exposition beside the policies' families.
func TestClusterInfo(t *testing.T) {
	m := New(nil)
	m.Clusters(func() iter.Seq[ClusterInfo] {
		return slices.Values([]ClusterInfo{{Cluster: "shop/cart/carts", Namespace: "shop", Name: "cart", Backend: "carts"},
			{Cluster: "shop/cart/carts", Namespace: "shop", Name: "cart", Backend: "carts"},
			{Cluster: "shop/cart/all/session", Namespace: "shop", Name: "cart"}})
	})
	m.Policies(func() iter.Seq[PolicyConditions] {
		return slices.Values([]PolicyConditions{{Policy: types.NamespacedName{Namespace: "shop", Name: "cart"},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: "Accepted"}}}})
	})
	want := `
# HELP lbplane_cluster_info ` + clusterInfoHelp + `
# TYPE lbplane_cluster_info gauge
lbplane_cluster_info{backend="",envoy_cluster_name="shop/cart/all/session",name="cart",namespace="shop"} 1
lbplane_cluster_info{backend="carts",envoy_cluster_name="shop/cart/carts",name="cart",namespace="shop"} 1
# HELP lbplane_policies Policies by condition type (Accepted, ResolvedRefs, Programmed, RolledBack), status and reason.
# TYPE lbplane_policies gauge
lbplane_policies{condition="Accepted",reason="Accepted",status="True"} 1
`
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), "lbplane_cluster_info", "lbplane_policies"); err != nil {
		t.Error(err)
	}
	// No cluster (no config published yet): no family, as the registry leaves out one with no series.
	m.Clusters(func() iter.Seq[ClusterInfo] { return func(func(ClusterInfo) bool) {} })
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "lbplane_cluster_info") {
		t.Errorf("lbplane_cluster_info with no cluster:\n%s", b)
	}
}
