package manifest

import (
	"sync"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// The decoder allocates every string of every document. Some values repeat across thousands of policies
// (endpoint addresses of shared backends, backend names such as "app", zones, the proxy group, enum values
// such as "HTTP"): shareStrings points those fields of a decoded policy at one copy of each value. The
// table is bounded (an attacker filling it only stops the sharing) and keeps short strings only: a value
// that repeats is short, and a long one would cost the table more than it saves.
const (
	sharedMax    = 4096
	sharedMaxLen = 128
)

var shared struct {
	sync.Mutex
	m map[string]string
}

// share returns the table's copy of s, adding s while the table has room.
func share(s string) string {
	if s == "" || len(s) > sharedMaxLen {
		return s
	}
	shared.Lock()
	defer shared.Unlock()
	if c, ok := shared.m[s]; ok {
		return c
	}
	if shared.m == nil {
		shared.m = map[string]string{}
	}
	if len(shared.m) < sharedMax {
		shared.m[s] = s
	}
	return s
}

// ShareStrings replaces the repeated string fields of p with shared copies: those of its spec, its
// namespace, and those its status repeats from policy to policy (the kinds, reasons and messages of its
// conditions, its algorithm, proxy group and backend names). The values are equal: nothing reading p can
// tell, and strings are immutable. The decoders of the push API and the config directory call it, and the
// Kubernetes source's cache as it stores a policy.
func ShareStrings(p *v1alpha1.LoadBalancerPolicy) {
	p.Namespace = share(p.Namespace)
	st := &p.Status
	st.Algorithm = v1alpha1.Algorithm(share(string(st.Algorithm)))
	st.ProxyGroup = share(st.ProxyGroup)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Reason, c.Message = share(c.Type), share(c.Reason), share(c.Message)
	}
	for i := range st.Backends {
		st.Backends[i].Name = share(st.Backends[i].Name)
	}
	s := &p.Spec
	s.ProxyGroup = share(s.ProxyGroup)
	s.Listener.Address = share(s.Listener.Address)
	s.Listener.Protocol = v1alpha1.Protocol(share(string(s.Listener.Protocol)))
	for i := range s.Routes {
		for j := range s.Routes[i].Backends {
			b := &s.Routes[i].Backends[j]
			b.Name = share(b.Name)
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		b.Name = share(b.Name)
		b.LoadBalancing.Algorithm = v1alpha1.Algorithm(share(string(b.LoadBalancing.Algorithm)))
		for j := range b.Endpoints {
			e := &b.Endpoints[j]
			e.Address, e.Zone = share(e.Address), share(e.Zone)
			e.State = v1alpha1.EndpointState(share(string(e.State)))
		}
	}
}
