package lbctl

import (
	"bytes"
	"context"
	"io"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestStatusPrintsEndpointsAndHashSkewHint(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local))
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name, p.Namespace = "demo", "default"
	p.Spec.Backends = []v1alpha1.Backend{{Name: "app"}}
	p.Spec.Backends[0].LoadBalancing.Algorithm = v1alpha1.AlgorithmMaglev
	p.Status.Backends = []v1alpha1.BackendStatus{{Name: "app", Proxies: 2, Skew: ptr(0.8), PerEndpoint: []v1alpha1.EndpointStatus{
		{Address: "10.0.0.4:80", EjectedOn: 2, ReportedBy: 2, Health: v1alpha1.EndpointEjected, Reasons: []string{"active health check failed"}, ExpectedShare: 0},
		{Address: "10.0.0.3:80", EjectedOn: 1, ReportedBy: 2, Health: v1alpha1.EndpointHealthy, Reasons: []string{"outlier detection: consecutive 5xx"}, ExpectedShare: 0},
		{Address: "10.0.0.1:80", Weight: 1, Requests: 90, RequestsPerSecond: 1.5, ExpectedShare: 0.5, ObservedShare: ptr(0.9), WarmingPercent: ptr(int32(40))},
		{Address: "10.0.0.9:80", Zone: "zone-b", Priority: 1, Backup: true, Weight: 1, ExpectedShare: 0},
		{Address: "10.0.0.7:80", Weight: 1, Health: v1alpha1.EndpointUnknown, UnknownSince: &since},
	},
		PerProxy: []v1alpha1.ProxyBackendHealth{{Node: "e1", Endpoints: v1alpha1.BackendEndpointCounts{Total: 4, Healthy: 2, Ejected: 2}, Mismatch: true},
			{Node: "e2", Endpoints: v1alpha1.BackendEndpointCounts{Total: 4, Healthy: 3, Ejected: 1}}},
		Mismatches: []v1alpha1.EndpointMismatch{{Address: "10.0.0.3:80", EjectedOn: []string{"e1"}, HealthyOn: []string{"e2"}, Reasons: []string{"outlier detection: consecutive 5xx"}}},
	}}
	var out bytes.Buffer
	if err := printPolicyStatus(&out, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ejected on 2 of 2: active health check failed", "healthy on 1 of 2 (Envoys disagree; ejected on 1: outlier detection: consecutive 5xx)",
		"app       e1      4           2         2         NO", "app       e2      4           3         1         yes",
		"10.0.0.3:80   healthy      e1           e2           outlier detection: consecutive 5xx", "10.0.0.7:80  -       0           1       0.0  0       0         -       0.0%      -         unknown since 03:04:05 (passive checks only", "10.0.0.1:80", "90.0%", "app: skew 0.80 (high: a few hash keys",
		"10.0.0.9:80  zone-b  1 (backup)", "healthy, warming: 40 % of full weight"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	// A round robin backend gets the figure but no hash hint.
	p.Spec.Backends[0].LoadBalancing.Algorithm = v1alpha1.AlgorithmRoundRobin
	out.Reset()
	printPolicyStatus(&out, p)
	if strings.Contains(out.String(), "high:") || !strings.Contains(out.String(), "app: skew 0.80\n") {
		t.Errorf("round robin:\n%s", out.String())
	}
}

func TestWatchRedrawsUntilCancelled(t *testing.T) {
	var out bytes.Buffer
	frames := 0
	var stop context.CancelFunc
	frame := func(w io.Writer) error {
		frames++
		if frames%3 == 0 {
			stop()
		}
		_, err := w.Write([]byte("frame\n"))
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop = cancel
	err := watchFrames(ctx, &out, true, time.Millisecond, frame)
	if err != nil || frames != 3 || strings.Count(out.String(), "\x1b[2J") != 3 {
		t.Fatalf("err %v, frames %d, output %q", err, frames, out.String())
	}
	// Into a pipe or a file (what a bytes.Buffer is to watchStatus): no terminal codes, frames one after another.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	stop = cancel2
	out.Reset()
	err = watchStatus(ctx2, &out, time.Millisecond, frame)
	if err != nil || frames != 6 || strings.Contains(out.String(), "\x1b") || strings.Count(out.String(), "frame\n") != 3 {
		t.Fatalf("not a terminal: err %v, frames %d, output %q", err, frames, out.String())
	}
}

func ptr[T any](v T) *T { return &v }

// A backend with no request in the window shows its p99 as the earlier requests', and says so; one with
// requests shows the window's own.
func TestStatusP99WithoutRequestsSaysItIsEarlier(t *testing.T) {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name, p.Namespace = "demo", "default"
	p.Spec.Backends = []v1alpha1.Backend{{Name: "idle"}, {Name: "busy"}}
	p.Status.Backends = []v1alpha1.BackendStatus{{Name: "idle", Proxies: 1, Requests: 0, LatencyP99Ms: ptr(25.0), WindowSeconds: 60},
		{Name: "busy", Proxies: 1, Requests: 40, LatencyP99Ms: ptr(12.0), WindowSeconds: 60}}
	var out bytes.Buffer
	if err := printPolicyStatus(&out, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"25ms (earlier)", "P99 (earlier): no request in the window", "40         0        12ms   "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "12ms (earlier)") {
		t.Errorf("a backend with requests in the window is marked earlier:\n%s", out.String())
	}
}

// With no backend figures yet, status gives the likely cause first: no Envoy connected, or not read yet.
func TestStatusWithoutBackendHealthSaysWhy(t *testing.T) {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name, p.Namespace = "demo", "default"
	p.Status.ProxyGroup = "edge"
	var out bytes.Buffer
	printPolicyStatus(&out, p)
	if !strings.Contains(out.String(), `no Envoy of proxy group "edge" is connected`) || strings.Contains(out.String(), "stats port") {
		t.Errorf("no Envoy connected:\n%s", out.String())
	}
	p.Status.Proxies.Connected = 2
	out.Reset()
	printPolicyStatus(&out, p)
	if !strings.Contains(out.String(), "No backend health reported yet: lbplane reads each of the 2 connected Envoys' stats port every --proxy-stats-interval") {
		t.Errorf("Envoys connected, not read yet:\n%s", out.String())
	}
}
