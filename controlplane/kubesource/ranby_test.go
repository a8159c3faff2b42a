package kubesource

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A proxy that ran a policy's result still counts as running it while it is Stale for a newer version of
// the group, but not once the policy's result changed, nor when it is another stream (a reconnect).
func TestProgrammedPolicyStaysProgrammedWhileItsResultIsUnchanged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pr := &translate.PolicyResult{Key: objkey.Key{Namespace: "default", Name: "b"}, Generation: 1, ProxyGroup: "default", Listener: "http-8080",
		Accepted: true, AcceptedReason: "Accepted", ResolvedRefs: true, ResolvedRefsReason: "ResolvedRefs"}
	proxy := func(state string, connected time.Time) []xdsserver.ProxyStatus {
		return []xdsserver.ProxyStatus{{NodeID: "envoy", Group: "default", API: "delta", ConnectedAt: connected, State: state}}
	}
	reason := func(pr *translate.PolicyResult, proxies []xdsserver.ProxyStatus, r *runs) string {
		st := policystatus.Compute(pr, r.view(proxies, pr), nil, metav1.NewTime(t0))
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionProgrammed {
				return c.Reason
			}
		}
		return ""
	}
	w := &runs{}
	if got := reason(pr, proxy(xdsserver.Stale, t0), w); got != policystatus.ReasonPending {
		t.Fatalf("never synced: %s, want Pending", got)
	}
	if got := reason(pr, proxy(xdsserver.Synced, t0), w); got != policystatus.ReasonProgrammed {
		t.Fatalf("synced: %s, want Programmed", got)
	}
	if got := reason(pr, proxy(xdsserver.Stale, t0), w); got != policystatus.ReasonProgrammed {
		t.Errorf("stale on another policy's change: %s, want Programmed", got)
	}
	if got := reason(pr, proxy(xdsserver.Stale, t0.Add(time.Second)), w); got != policystatus.ReasonPending {
		t.Errorf("reconnected, not yet synced: %s, want Pending", got)
	}
	if got := reason(pr, proxy(xdsserver.Synced, t0), w); got != policystatus.ReasonProgrammed {
		t.Fatalf("synced again: %s, want Programmed", got)
	}
	changed := *pr
	if got := reason(&changed, proxy(xdsserver.Stale, t0), w); got != policystatus.ReasonPending {
		t.Errorf("stale on this policy's own change: %s, want Pending", got)
	}
}

// A proxy that is never current with its group (it always has a response in flight, as under endpoint
// churn) runs a policy's new result once it has acknowledged a response sent after the result was first
// seen; not before.
func TestBehindProxyRunsAResultOnceItAcknowledgesPastIt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pr := &translate.PolicyResult{Key: objkey.Key{Namespace: "default", Name: "b"}, Generation: 1, ProxyGroup: "default", Listener: "http-8080",
		Accepted: true, AcceptedReason: "Accepted", ResolvedRefs: true, ResolvedRefsReason: "ResolvedRefs"}
	const eds, cds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	// behind: EDS sent sent and acknowledged acked, in flight; CDS settled at v0; the group is at current.
	behind := func(sent, acked, current string) []xdsserver.ProxyStatus {
		return []xdsserver.ProxyStatus{{NodeID: "envoy", Group: "default", API: "delta", ConnectedAt: t0, State: xdsserver.Stale, Current: current,
			Types: []xdsserver.TypeStatus{{TypeURL: cds, SentVersion: "v0", AckedVersion: "v0"}, {TypeURL: eds, SentVersion: sent, AckedVersion: acked, Pending: true}}}}
	}
	programmed := func(r *runs, proxies []xdsserver.ProxyStatus) bool {
		st := policystatus.Compute(pr, r.view(proxies, pr), nil, metav1.NewTime(t0))
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionProgrammed {
				return c.Status == metav1.ConditionTrue
			}
		}
		return false
	}
	r := &runs{}
	if programmed(r, behind("v2", "v1", "v3")) {
		t.Fatal("Programmed when first seen, with v2 in flight and the group at v3")
	}
	if programmed(r, behind("v3", "v2", "v4")) {
		t.Fatal("Programmed after acknowledging v2, which was sent before the result was seen")
	}
	if !programmed(r, behind("v5", "v3", "v6")) {
		t.Fatal("not Programmed after acknowledging v3, sent after the result was seen")
	}
	if !programmed(r, behind("v9", "v8", "v9")) {
		t.Error("not Programmed later on, the result unchanged")
	}
	// When what was in flight at the mark was the group's current config, its acknowledgement is enough.
	r = &runs{}
	if programmed(r, behind("v3", "v2", "v3")) {
		t.Fatal("Programmed with v3 in flight")
	}
	if !programmed(r, behind("v4", "v3", "v4")) {
		t.Error("not Programmed after acknowledging v3, current when the result was seen")
	}
	// A rejected type does not count as past the mark.
	r = &runs{}
	programmed(r, behind("v2", "v1", "v3"))
	nacked := behind("v4", "v1", "v4")
	nacked[0].Types[1].Pending, nacked[0].Types[1].Nacked, nacked[0].State = false, true, xdsserver.Nacked
	if programmed(r, nacked) {
		t.Error("Programmed while the proxy rejects the endpoints it was sent")
	}
}
