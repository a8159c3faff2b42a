package kubesource

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A proxy that ran a policy's result still counts as running it while it is Stale for a newer version of
// the group, but not once the policy's result changed, nor when it is another stream (a reconnect).
func TestProgrammedPolicyStaysProgrammedWhileItsResultIsUnchanged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pr := &translate.PolicyResult{Key: translate.Key{Namespace: "default", Name: "b"}, Generation: 1, ProxyGroup: "default",
		Accepted: true, AcceptedReason: "Accepted", ResolvedRefs: true, ResolvedRefsReason: "ResolvedRefs"}
	proxy := func(state string, connected time.Time) []xdsserver.ProxyStatus {
		return []xdsserver.ProxyStatus{{NodeID: "envoy", Group: "default", API: "delta", ConnectedAt: connected, State: state}}
	}
	reason := func(pr *translate.PolicyResult, proxies []xdsserver.ProxyStatus, w *statusWriter) string {
		seen := runsUnchanged(proxies, pr, w.ran[pr.Key])
		st := policystatus.Compute(pr, seen, nil, metav1.NewTime(t0))
		w.record(pr, seen, &st)
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionProgrammed {
				return c.Reason
			}
		}
		return ""
	}
	w := &statusWriter{ran: map[translate.Key]ranBy{}}
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
