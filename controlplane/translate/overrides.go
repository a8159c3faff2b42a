package translate

import (
	"hash"
	"net"
	"reflect"
	"slices"
	"strconv"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// Overrides are the operator's endpoint overrides in force (drain, maintenance), by policy: an input of
// translation as the files and Services a policy reads are, kept by the server beside the policies rather
// than in their specs. A Draining override sends the endpoint as DRAINING, as the spec's state: Draining
// does; a Maintenance one leaves it out of the load assignment. The stronger of the spec's state and the
// overrides applies. A map handed to translation is never modified afterwards: a change is a new map.
type Overrides map[objkey.Key][]v1alpha1.EndpointOverride

// applyOverrides returns endpoints with the overrides of backend applied (a new slice when one applies:
// the endpoints may be shared), how many it left out for maintenance, and counts into matched how many
// endpoints each override applies to.
func applyOverrides(backend string, endpoints []ir.Endpoint, ovs []v1alpha1.EndpointOverride, matched []int32) ([]ir.Endpoint, int) {
	var out []ir.Endpoint
	removed := 0
	for i, e := range endpoints {
		state := v1alpha1.EndpointOverrideState("")
		for j := range ovs {
			if !overrideMatches(&ovs[j], backend, e) {
				continue
			}
			matched[j]++
			if state != v1alpha1.OverrideMaintenance {
				state = ovs[j].State
			}
		}
		if state == "" {
			if out != nil {
				out = append(out, e)
			}
			continue
		}
		if out == nil {
			out = append(make([]ir.Endpoint, 0, len(endpoints)), endpoints[:i]...)
		}
		switch state {
		case v1alpha1.OverrideMaintenance:
			removed++
		default:
			e.Draining = true
			out = append(out, e)
		}
	}
	if out == nil {
		return endpoints, 0
	}
	return out, removed
}

// overrideMatches tells whether o applies to endpoint e of backend: the backend matches (or o names none),
// the address is e's or the host name it was resolved from, and the port is e's (or o names none).
func overrideMatches(o *v1alpha1.EndpointOverride, backend string, e ir.Endpoint) bool {
	if o.Backend != "" && o.Backend != backend {
		return false
	}
	host, port, err := v1alpha1.SplitEndpoint(o.Endpoint)
	if err != nil || (port != 0 && uint32(port) != e.Port) {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		eip := net.ParseIP(e.Address)
		return eip != nil && eip.Equal(ip)
	}
	return host == e.Hostname || host == e.Address
}

// EndpointOverrides returns the overrides in force on the policy, with how many of its endpoints each
// applies to; nil without any.
func (r *PolicyResult) EndpointOverrides() []v1alpha1.EndpointOverrideStatus {
	if r.rare == nil {
		return nil
	}
	return r.rare.overrides
}

// overridesChanged lists the policies whose overrides may differ between two inputs: none when both are
// the same map, otherwise every policy either names.
func overridesChanged(prev, next Overrides) []objkey.Key {
	if reflect.ValueOf(prev).UnsafePointer() == reflect.ValueOf(next).UnsafePointer() && len(prev) == len(next) {
		return nil
	}
	var out []objkey.Key
	for k := range prev {
		out = append(out, k)
	}
	for k := range next {
		if _, ok := prev[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// writeOverrides adds a policy's overrides to a hash of what it reads.
func writeOverrides(h hash.Hash, ovs []v1alpha1.EndpointOverride) {
	writeInt(h, int64(len(ovs)))
	for _, o := range ovs {
		writeString(h, o.Backend)
		writeString(h, o.Endpoint)
		writeString(h, string(o.State))
		writeInt(h, o.Since.UnixNano())
	}
}

// Matching lists the endpoints ("address:port") of policy k's backends, as res serves them, that o names,
// and those of them that are draining (the spec's state: Draining, a terminating Service endpoint, or an
// override). An endpoint under maintenance is not served, and so not listed.
func Matching(res *Result, k objkey.Key, o v1alpha1.EndpointOverride) (all, draining []string) {
	pr := res.Policies.Of(k)
	if pr == nil {
		return nil, nil
	}
	g := res.IR.Groups[pr.ProxyGroup]
	if g == nil {
		return nil, nil
	}
	for _, c := range g.Clusters {
		backend, ok := pr.BackendOf(c.Name)
		if !ok {
			continue
		}
		for _, e := range c.Endpoints {
			if !overrideMatches(&o, backend, e) {
				continue
			}
			addr := net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port)))
			if !slices.Contains(all, addr) {
				all = append(all, addr)
			}
			if e.Draining && !slices.Contains(draining, addr) {
				draining = append(draining, addr)
			}
		}
	}
	return all, draining
}
