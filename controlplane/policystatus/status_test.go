package policystatus

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

func TestProgrammed(t *testing.T) {
	r := &translate.PolicyResult{Key: translate.Key{Namespace: "ns", Name: "p"}, Accepted: true, ProxyGroup: "g", Listener: "http-80", Clusters: []string{"ns/p/a"}, Generation: 4}
	now := metav1.Now()
	prog := func(ps ...xdsserver.ProxyStatus) metav1.Condition {
		st := Compute(r, ps, nil, now)
		return st.Conditions[len(st.Conditions)-1]
	}
	if c := prog(); c.Reason != ReasonNoProxies || c.Status != metav1.ConditionFalse {
		t.Errorf("no proxy: %+v", c)
	}
	other := xdsserver.ProxyStatus{Group: "other", State: xdsserver.Synced}
	if c := prog(other); c.Reason != ReasonNoProxies {
		t.Errorf("a proxy of another group counts: %+v", c)
	}
	synced := xdsserver.ProxyStatus{NodeID: "a", Group: "g", State: xdsserver.Synced}
	if c := prog(synced); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 4 {
		t.Errorf("synced: %+v", c)
	}
	stale := xdsserver.ProxyStatus{NodeID: "b", Group: "g", State: xdsserver.Stale}
	if c := prog(synced, stale); c.Reason != ReasonPending {
		t.Errorf("one stale: %+v", c)
	}
	nacked := func(node, typ, msg string, resources []string, policies []apiwire.PolicyRef) xdsserver.ProxyStatus {
		return xdsserver.ProxyStatus{NodeID: node, Group: "g", State: xdsserver.Nacked, Types: []xdsserver.TypeStatus{
			{TypeURL: resource.ListenerType},
			{TypeURL: typ, Nacked: true, NackMessage: msg, NackedResources: resources, NackedPolicies: policies}}}
	}
	// Envoy's message ends in a newline and may span lines: the condition's is one line.
	mine := nacked("c", resource.ClusterType, "ns/p/a: bad\n", []string{"ns/p/a"}, []apiwire.PolicyRef{{Namespace: "ns", Name: "p"}})
	if c := prog(synced, mine); c.Reason != ReasonRejected || c.Message != "Envoy rejected the config: c: Cluster: ns/p/a: bad" {
		t.Errorf("rejected: %+v", c)
	}
	// The message names this policy's cluster, but the NACK was put on another policy's resources.
	theirs := nacked("d", resource.ListenerType, "http-8080: bad; see ns/p/a", []string{"http-8080"}, []apiwire.PolicyRef{{Namespace: "ns", Name: "q"}})
	if c := prog(synced, theirs); c.Status != metav1.ConditionTrue {
		t.Errorf("another policy's rejection: %+v", c)
	}
	unknown := nacked("e", resource.ListenerType, "bad", nil, nil)
	if c := prog(synced, unknown); c.Reason != ReasonRejected {
		t.Errorf("a NACK put on no resource counts against every policy: %+v", c)
	}
	r.Accepted = false
	if c := prog(synced); c.Reason != ReasonNotAccepted {
		t.Errorf("not accepted: %+v", c)
	}
}

func TestBackendsAndWarningsAreBounded(t *testing.T) {
	r := &translate.PolicyResult{Key: translate.Key{Namespace: "ns", Name: "p"}, ProxyGroup: "g", Accepted: true, ResolvedRefs: true}
	health := proxystats.Health{"g": {}}
	for i := range 70 {
		c := fmt.Sprintf("ns/p/route-%d/session", i)
		r.Clusters, r.Backends = append(r.Clusters, c), append(r.Backends, "")
		health["g"][c] = v1alpha1.BackendStatus{}
		r.Warnings = append(r.Warnings, fmt.Sprintf("w%d", i))
	}
	r.Clusters = append(r.Clusters, "ns/p/app")
	r.Backends = append(r.Backends, "app")
	health["g"]["ns/p/app"] = v1alpha1.BackendStatus{Endpoints: v1alpha1.BackendEndpointCounts{Total: 2, Healthy: 1}}
	st := Compute(r, nil, health, metav1.Now())
	if len(st.Backends) != MaxListed || st.Backends[0].Name != "app" {
		t.Errorf("%d backends, first %q", len(st.Backends), st.Backends[0].Name)
	}
	if len(st.Warnings) != MaxListed || st.Warnings[MaxListed-1] != "... and 7 more (lbctl lint shows them all)" {
		t.Errorf("%d warnings, last %q", len(st.Warnings), st.Warnings[len(st.Warnings)-1])
	}
}

// A message over the API server's limit is cut, on a character boundary, and says so.
func TestLongConditionMessagesAreCut(t *testing.T) {
	r := &translate.PolicyResult{Key: translate.Key{Namespace: "a", Name: "b"}, ProxyGroup: "default",
		AcceptedReason: translate.ReasonInvalid, AcceptedMessage: strings.Repeat("é", 40000)}
	st := Compute(r, nil, nil, metav1.Now())
	for _, c := range st.Conditions {
		if len(c.Message) > MaxConditionMessage || !utf8.ValidString(c.Message) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", c.Type, len(c.Message), utf8.ValidString(c.Message))
		}
	}
	if m := st.Conditions[0].Message; !strings.HasSuffix(m, "bytes more)") {
		t.Errorf("a cut message does not say so: ...%s", m[len(m)-40:])
	}
}
