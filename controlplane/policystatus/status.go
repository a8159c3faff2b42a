// Package policystatus computes a policy's status from what translation concluded and what the connected
// Envoys of its proxy group acknowledged. The same function serves the standalone API and the Kubernetes
// status writer.
package policystatus

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Reasons of the Programmed condition.
const (
	ReasonProgrammed  = "Programmed"
	ReasonNotAccepted = "NotAccepted"
	// ReasonNotServed: accepted, but a certificate or file it needs cannot be used, so no Envoy serves it.
	ReasonNotServed = "NotServed"
	ReasonNoProxies = "NoProxies"
	ReasonRejected  = "Rejected"
	ReasonPending   = "Pending"
)

// Reasons of the Ready condition.
const (
	ReasonReady         = "Ready"
	ReasonNotProgrammed = "NotProgrammed"
	// ReasonNotReported: some connected Envoy has not reported a backend's endpoints yet (they are read
	// every --proxy-stats-interval).
	ReasonNotReported = "NotReported"
	// ReasonNoHealthyEndpoints: an Envoy has no endpoint of a backend that takes traffic.
	ReasonNoHealthyEndpoints = "NoHealthyEndpoints"
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
	st.EndpointOverrides = r.EndpointOverrides()
	// Until an Envoy reports, only draining endpoints are known not to be healthy.
	st.Endpoints.Healthy = r.HealthyEndpoints
	// Backends first, then session clusters (they merge a route's backends, whose endpoints are counted
	// already): the CRD bounds the list, and a longer one would make the API server refuse the whole status.
	var sessions []v1alpha1.BackendStatus
	healthy, total, reported := int32(0), int32(0), 0
	for _, c := range r.Clusters {
		name, isBackend := r.BackendOf(c)
		if !isBackend {
			name, _ = r.SessionOf(c)
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
	case r.Listener == "":
		// Accepted, but translation left it out: its listener cannot be served (ResolvedRefs says why).
		prog.Reason, prog.Message = ReasonNotServed, "no Envoy serves the policy: "+r.ResolvedRefsMessage
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
	meta.SetStatusCondition(&st.Conditions, ready(r, prog, proxies, health, now))
	// The one place messages are cut: every condition written, by the API or to Kubernetes, is made here.
	for i := range st.Conditions {
		st.Conditions[i].Message = limitMessage(st.Conditions[i].Message)
	}
	return st
}

// ready decides the Ready condition: Programmed, and on every connected Envoy of the group each backend of
// the policy has an endpoint that takes traffic, as that Envoy's own stats report it (perProxy). An endpoint
// waiting for its first active health check takes no traffic, so a policy whose backends are starting is not
// Ready yet, and a request sent once it is gets an answer from a backend, through any of the Envoys.
func ready(r *translate.PolicyResult, prog metav1.Condition, proxies []xdsserver.ProxyStatus, health proxystats.Health, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: r.Generation, LastTransitionTime: now}
	if prog.Status != metav1.ConditionTrue {
		c.Reason, c.Message = ReasonNotProgrammed, "the policy is not Programmed"
		return c
	}
	var nodes []string
	for _, p := range proxies {
		if p.Group == r.ProxyGroup && !slices.Contains(nodes, p.NodeID) {
			nodes = append(nodes, p.NodeID)
		}
	}
	slices.Sort(nodes)
	for _, cl := range r.Clusters {
		name, isBackend := r.BackendOf(cl)
		if !isBackend {
			continue
		}
		b, ok := health.Backend(r.ProxyGroup, cl, name)
		if !ok {
			c.Reason, c.Message = ReasonNotReported, fmt.Sprintf("no Envoy has reported backend %s yet", name)
			return c
		}
		rows := map[string]v1alpha1.ProxyBackendHealth{}
		for _, row := range b.PerProxy {
			rows[row.Node] = row
		}
		for i, n := range nodes {
			row, ok := rows[n]
			switch {
			case !ok && len(b.PerProxy) < proxystats.MaxProxiesListed:
				c.Reason, c.Message = ReasonNotReported, fmt.Sprintf("Envoy %s has not reported backend %s yet", n, name)
				return c
			case !ok && i < proxystats.MaxProxiesListed:
				// More Envoys than perProxy lists: the ones listed are checked, the counted view below for all.
			case ok && row.Endpoints.Healthy == 0:
				c.Reason = ReasonNoHealthyEndpoints
				c.Message = fmt.Sprintf("backend %s has no endpoint that takes traffic on Envoy %s (%d endpoints, %d ejected or not yet healthy)",
					name, n, row.Endpoints.Total, row.Endpoints.Ejected)
				return c
			}
		}
		switch {
		case int(b.Proxies) < len(nodes):
			c.Reason, c.Message = ReasonNotReported, fmt.Sprintf("%d of %d Envoys have reported backend %s", b.Proxies, len(nodes), name)
			return c
		case b.Endpoints.Healthy == 0:
			c.Reason, c.Message = ReasonNoHealthyEndpoints, fmt.Sprintf("backend %s: every endpoint is ejected or not yet healthy on most Envoys", name)
			return c
		}
	}
	c.Status, c.Reason = metav1.ConditionTrue, ReasonReady
	c.Message = fmt.Sprintf("every backend has an endpoint that takes traffic on each of the %d Envoys of group %q", len(nodes), r.ProxyGroup)
	return c
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
// keeps the times in the status it stores. The policies whose times changed are marked for the store
// (Changed), so that the times survive a restart (Restore). Safe for concurrent use.
type Transitions struct {
	mu    sync.Mutex
	seen  map[objkey.Key]map[string]transition
	dirty map[objkey.Key]bool
}

type transition struct {
	status metav1.ConditionStatus
	at     metav1.Time
}

// storedTransition is a condition's kept status and time as the store holds them, by condition type.
type storedTransition struct {
	Status metav1.ConditionStatus `json:"status"`
	At     metav1.Time            `json:"at"`
}

// Keep sets each condition's LastTransitionTime to when it first took its current status for key, and
// records the ones that changed as of their own time.
func (t *Transitions) Keep(key objkey.Key, conds []metav1.Condition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[objkey.Key]map[string]transition{}
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
		t.markLocked(key)
	}
}

func (t *Transitions) markLocked(key objkey.Key) {
	if t.dirty == nil {
		t.dirty = map[objkey.Key]bool{}
	}
	t.dirty[key] = true
}

// Restore takes back the times the store held for key (a record Changed made); a record that does not
// decode is left out.
func (t *Transitions) Restore(key objkey.Key, record []byte) error {
	var stored map[string]storedTransition
	if err := json.Unmarshal(record, &stored); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[objkey.Key]map[string]transition{}
	}
	m := make(map[string]transition, len(stored))
	for typ, st := range stored {
		m[typ] = transition{status: st.Status, at: st.At}
	}
	t.seen[key] = m
	return nil
}

// Changed returns the records of the policies whose times changed since the last call (nil for a policy
// forgotten since), and marks them unchanged.
func (t *Transitions) Changed() map[objkey.Key][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return nil
	}
	out := make(map[objkey.Key][]byte, len(t.dirty))
	for k := range t.dirty {
		m, ok := t.seen[k]
		if !ok {
			out[k] = nil
			continue
		}
		stored := make(map[string]storedTransition, len(m))
		for typ, tr := range m {
			stored[typ] = storedTransition{Status: tr.status, At: tr.at}
		}
		b, err := json.Marshal(stored)
		if err != nil {
			continue
		}
		out[k] = b
	}
	t.dirty = nil
	return out
}

// Dirty marks key's times changed again, for a write that failed.
func (t *Transitions) Dirty(key objkey.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markLocked(key)
}

// Forget drops what is kept for the policies not in live (deleted ones).
func (t *Transitions) Forget(live func(objkey.Key) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.seen {
		if !live(k) {
			delete(t.seen, k)
			t.markLocked(k)
		}
	}
}
