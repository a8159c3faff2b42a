// Package policystatus computes a policy's status from what translation concluded and what the connected
// Envoys of its proxy group acknowledged. The same function serves the standalone API and the Kubernetes
// status writer.
package policystatus

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Reasons of the Programmed condition.
const (
	ReasonProgrammed  = "Programmed"
	ReasonNotAccepted = "NotAccepted"
	ReasonNoProxies   = "NoProxies"
	ReasonRejected    = "Rejected"
	ReasonPending     = "Pending"
)

// MaxListed bounds status.backends and status.warnings, as the CRD does.
const MaxListed = 64

// Compute returns the status of one policy. health (what the Envoys report of each backend) may be nil.
func Compute(r *translate.PolicyResult, proxies []xdsserver.ProxyStatus, health proxystats.Health, now metav1.Time) v1alpha1.LoadBalancerPolicyStatus {
	// The findings for gRPC clients (lint.GRPC) are shown while the group has one.
	grpcClients := slices.ContainsFunc(proxies, func(p xdsserver.ProxyStatus) bool { return p.Group == r.ProxyGroup && p.Client == xdscache.ClientGRPC })
	warnings, grpcRefused := lint.ForClients(r.Warnings, grpcClients)
	st := v1alpha1.LoadBalancerPolicyStatus{ObservedGeneration: r.Generation, Algorithm: r.Algorithm(), ProxyGroup: r.ProxyGroup, Conditions: r.Conditions(now), Warnings: warnings}
	st.Endpoints.Total = r.Endpoints
	// Until an Envoy reports, only draining endpoints are known not to be healthy.
	st.Endpoints.Healthy = r.HealthyEndpoints
	// Backends first, then session clusters (they merge a route's backends, whose endpoints are counted
	// already): the CRD bounds the list, and a longer one would make the API server refuse the whole status.
	var sessions []v1alpha1.BackendStatus
	healthy, total, reported := int32(0), int32(0), 0
	for _, c := range r.Clusters {
		name, isBackend := r.BackendOf(c)
		if !isBackend {
			name = strings.TrimPrefix(c, r.Key.Namespace+"/"+r.Key.Name+"/") // "<route>/session"
		}
		b, ok := health.Backend(r.ProxyGroup, c, name)
		switch {
		case !ok:
		case isBackend:
			st.Backends = append(st.Backends, b)
			healthy += b.Endpoints.Healthy
			total += b.Endpoints.Total
			st.Endpoints.Mismatched += b.Endpoints.Mismatched
			reported++
		default:
			sessions = append(sessions, b)
		}
	}
	switch {
	case reported > 0 && reported == r.BackendCount() && r.ResolvedByEnvoy:
		// Host names count once in the policy but as many endpoints as they resolve to in Envoy.
		st.Endpoints.Total, st.Endpoints.Healthy = total, healthy
	case reported > 0 && reported == r.BackendCount():
		st.Endpoints.Healthy = min(healthy, st.Endpoints.Total)
	}
	st.Backends = append(st.Backends, sessions...)
	if len(st.Backends) > MaxListed {
		st.Backends = st.Backends[:MaxListed]
	}
	if len(st.Warnings) > MaxListed {
		n := len(st.Warnings) - MaxListed + 1
		st.Warnings = append(slices.Clone(st.Warnings[:MaxListed-1]), fmt.Sprintf("... and %d more (lbctl lint shows them all)", n))
	}
	var nacks []string
	for _, p := range proxies {
		if p.Group != r.ProxyGroup {
			continue
		}
		st.Proxies.Connected++
		switch p.State {
		case xdsserver.Synced:
			st.Proxies.Synced++
		case xdsserver.Nacked:
			// Envoy applies the resources of an update it can and rejects the others; a rejection of another
			// policy's listener or cluster does not make this one unprogrammed. The tracker put the NACK on
			// resources and their policies (see Owners).
			if msg := rejection(p, r.Key); msg != "" {
				nacks = append(nacks, fmt.Sprintf("%s: %s", p.NodeID, msg))
			} else {
				st.Proxies.Synced++
			}
		}
	}
	prog := metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse,
		ObservedGeneration: r.Generation, LastTransitionTime: now}
	switch {
	case !r.Accepted:
		prog.Reason, prog.Message = ReasonNotAccepted, "the policy is not accepted"
	case st.Proxies.Connected == 0:
		prog.Reason, prog.Message = ReasonNoProxies, fmt.Sprintf("no Envoy of proxy group %q is connected", r.ProxyGroup)
	case len(nacks) > 0:
		prog.Reason, prog.Message = ReasonRejected, "Envoy rejected the config: "+strings.Join(nacks, "; ")
	case len(grpcRefused) > 0:
		// Left out of what the group's gRPC clients are served (xdsbuild.GRPCRefused): they would reject it.
		prog.Reason = ReasonRejected
		prog.Message = fmt.Sprintf("not served to the gRPC clients of group %q: %s", r.ProxyGroup, strings.Join(grpcRefused, "; "))
	case st.Proxies.Synced == st.Proxies.Connected:
		prog.Status, prog.Reason = metav1.ConditionTrue, ReasonProgrammed
		prog.Message = fmt.Sprintf("%d of %d proxies of group %q run this config", st.Proxies.Synced, st.Proxies.Connected, r.ProxyGroup)
	default:
		prog.Reason = ReasonPending
		prog.Message = fmt.Sprintf("%d of %d proxies of group %q run this config", st.Proxies.Synced, st.Proxies.Connected, r.ProxyGroup)
	}
	meta.SetStatusCondition(&st.Conditions, prog)
	// The one place messages are cut: every condition written, by the API or to Kubernetes, is made here.
	for i := range st.Conditions {
		st.Conditions[i].Message = limitMessage(st.Conditions[i].Message)
	}
	return st
}

// MaxConditionMessage is the API server's limit on a condition message, in bytes: a status with a longer
// one is refused whole. Many NACKing Envoys, or many field errors, exceed it.
const MaxConditionMessage = 32768

// limitMessage cuts a condition message to MaxConditionMessage, on a UTF-8 boundary, and says how much it
// left out. Every condition goes through Compute, so this is the one place messages are cut.
func limitMessage(msg string) string {
	if len(msg) <= MaxConditionMessage {
		return msg
	}
	suffix := fmt.Sprintf(" ... (%d bytes more)", len(msg))
	cut := MaxConditionMessage - len(suffix)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + fmt.Sprintf(" ... (%d bytes more)", len(msg)-cut)
}

// Transitions keeps when each policy's conditions last changed status, for the standalone API, which
// computes status on every read: without it, lastTransitionTime would be the time of the read. Kubernetes
// keeps the times in the status it stores. Safe for concurrent use.
type Transitions struct {
	mu   sync.Mutex
	seen map[translate.Key]map[string]transition
}

type transition struct {
	status metav1.ConditionStatus
	at     metav1.Time
}

// Keep sets each condition's LastTransitionTime to when it first took its current status for key, and
// records the ones that changed as of their own time.
func (t *Transitions) Keep(key translate.Key, conds []metav1.Condition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[translate.Key]map[string]transition{}
	}
	m := t.seen[key]
	if m == nil {
		m = make(map[string]transition, len(conds))
		t.seen[key] = m
	}
	for i := range conds {
		c := &conds[i]
		if prev, ok := m[c.Type]; ok && prev.status == c.Status {
			c.LastTransitionTime = prev.at
			continue
		}
		m[c.Type] = transition{status: c.Status, at: c.LastTransitionTime}
	}
}

// Forget drops what is kept for the policies not in live (deleted ones).
func (t *Transitions) Forget(live func(translate.Key) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.seen {
		if !live(k) {
			delete(t.seen, k)
		}
	}
}
