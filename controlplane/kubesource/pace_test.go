package kubesource

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The gap after a resync follows what it cost, so that a change no longer waits 100 ms behind a resync
// of 2 ms, while a costly resync still gathers what comes during the next gap.
func TestResyncGapFollowsTheCostOfTheLastResync(t *testing.T) {
	most := 100 * time.Millisecond
	for _, c := range []struct{ took, want time.Duration }{
		{0, minResyncGap},
		{100 * time.Microsecond, minResyncGap},
		{2 * time.Millisecond, 20 * time.Millisecond},
		{5 * time.Millisecond, 50 * time.Millisecond},
		{30 * time.Millisecond, most},
		{2 * time.Second, most}, // the first resync of 10,000 policies
	} {
		if got := resyncGap(c.took, most); got != c.want {
			t.Errorf("after a resync of %v: gap %v, want %v", c.took, got, c.want)
		}
	}
	if got := resyncGap(0, time.Millisecond); got != time.Millisecond {
		t.Errorf("a Debounce below the floor: gap %v, want the Debounce (1ms)", got)
	}
}

// Only changes of Services and their EndpointSlices alone wait for the endpoint interval: a policy, a Secret,
// a Gateway API object or an event the change sets cannot describe goes out with them at once.
func TestEndpointsOnly(t *testing.T) {
	svc := types.NamespacedName{Namespace: "default", Name: "web"}
	for _, c := range []struct {
		what string
		add  func(*changes)
		want bool
	}{
		{"nothing", func(*changes) {}, false},
		{"a Service", func(ch *changes) { ch.services[svc] = true }, true},
		{"a Service and a policy", func(ch *changes) { ch.services[svc], ch.policies[svc] = true, true }, false},
		{"a Service and a Secret", func(ch *changes) { ch.services[svc], ch.secrets[svc] = true, true }, false},
		{"a Service and a Gateway API object", func(ch *changes) { ch.services[svc], ch.gateways = true, true }, false},
		{"a Service and everything", func(ch *changes) { ch.services[svc], ch.all = true, true }, false},
	} {
		r := &resolved{pending: newChanges(false)}
		c.add(&r.pending)
		if got := r.endpointsOnly(); got != c.want {
			t.Errorf("%s pending: endpoints only %v, want %v", c.what, got, c.want)
		}
	}
}
