package kubesource

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// More proxies than one key holds are split over several keys and read back whole; more than the report
// holds are left out and counted.
func TestReportDataSplitsAndCaps(t *testing.T) {
	var ps []xdsserver.ProxyStatus
	for i := range 100 {
		ps = append(ps, xdsserver.ProxyStatus{NodeID: fmt.Sprintf("envoy-%03d", i), Group: "default"})
	}
	data, dropped, err := reportData(ps, 1<<10, 1<<20)
	if err != nil || dropped != 0 {
		t.Fatalf("reportData: dropped %d, %v", dropped, err)
	}
	if len(data) < 2 {
		t.Errorf("%d keys, want the proxies split over several", len(data))
	}
	for k, v := range data {
		if len(v) > 1<<10 {
			t.Errorf("key %s holds %d bytes, more than the 1 KiB asked for", k, len(v))
		}
	}
	data[heartbeatKey] = time.Now().Format(time.RFC3339Nano)
	got := liveProxies([]corev1.ConfigMap{{Data: data}}, time.Now())
	seen := map[string]bool{}
	for _, p := range got {
		seen[p.NodeID] = true
	}
	if len(got) != len(ps) || len(seen) != len(ps) {
		t.Errorf("read back %d proxies (%d distinct), want %d", len(got), len(seen), len(ps))
	}

	data, dropped, err = reportData(ps, 1<<10, 2<<10)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, v := range data {
		size += len(v)
	}
	if dropped == 0 || size > 2<<10 {
		t.Errorf("capped at 2 KiB: %d bytes kept, %d proxies left out", size, dropped)
	}
	if kept := len(liveProxies([]corev1.ConfigMap{{Data: map[string]string{heartbeatKey: time.Now().Format(time.RFC3339Nano)}}}, time.Now())); kept != 0 {
		t.Errorf("an empty report read as %d proxies", kept)
	}
}

// A report names its Pod as owner only in the Pod's own namespace: the garbage collector takes an owner in
// another namespace for one that is gone, and would delete the report as fast as it is written.
func TestReportOwnedOnlyInThePodsNamespace(t *testing.T) {
	for _, tc := range []struct {
		s    *Source
		want bool
	}{
		{&Source{LeaderElectionNamespace: "lbplane", PodName: "p", PodNamespace: "lbplane", PodUID: "u"}, true},
		{&Source{LeaderElectionNamespace: "other", PodName: "p", PodNamespace: "lbplane", PodUID: "u"}, false},
		{&Source{LeaderElectionNamespace: "lbplane", PodName: "p", PodNamespace: "lbplane"}, false},
		{&Source{LeaderElectionNamespace: "lbplane", id: "host-1234"}, false},
	} {
		if got := tc.s.ownedByPod(); got != tc.want {
			t.Errorf("%+v: owned by its Pod %v, want %v", tc.s, got, tc.want)
		}
		if name := tc.s.reportName(); tc.want != (name == "lbplane-proxies-p") {
			t.Errorf("%+v: report name %q", tc.s, name)
		}
	}
}
