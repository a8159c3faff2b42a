package kubesource

import (
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// An endpoint that starts or ends its slow-start ramp changes the written health at once; its percentage
// moving within the window waits for the load figures (LoadStatusInterval), as requests per second do.
func TestWarmingStartAndEndAreHealthItsPercentageIsLoad(t *testing.T) {
	pct := func(v int32) *int32 { return &v }
	backend := func(warming *int32, rps float64) v1alpha1.BackendStatus {
		return v1alpha1.BackendStatus{Name: "b", Proxies: 1, WindowSeconds: 60, Endpoints: v1alpha1.BackendEndpointCounts{Total: 2, Healthy: 2},
			PerEndpoint: []v1alpha1.EndpointStatus{{Address: "a:1", RequestsPerSecond: rps}, {Address: "b:1", WarmingPercent: warming}}}
	}
	if !sameHealth(backend(pct(10), 1), backend(pct(40), 2)) {
		t.Error("a percentage moving within the window is a health change")
	}
	if sameHealth(backend(nil, 1), backend(pct(10), 1)) {
		t.Error("an endpoint starting to warm up is not a health change")
	}
	if sameHealth(backend(pct(90), 1), backend(nil, 1)) {
		t.Error("an endpoint done warming up is not a health change")
	}
	now := time.Now()
	written := []v1alpha1.BackendStatus{backend(pct(10), 1)}
	next := []v1alpha1.BackendStatus{backend(pct(40), 2)}
	if !limitLoad(next, written, now.Add(-time.Second), now, time.Minute) || *next[0].PerEndpoint[1].WarmingPercent != 10 {
		t.Errorf("within the load interval the written percentage stays: %+v", next[0].PerEndpoint)
	}
	next = []v1alpha1.BackendStatus{backend(nil, 2)}
	limitLoad(next, written, now.Add(-time.Second), now, time.Minute)
	if next[0].PerEndpoint[1].WarmingPercent != nil {
		t.Errorf("the end of the ramp waits for the load interval: %+v", next[0].PerEndpoint)
	}
}
