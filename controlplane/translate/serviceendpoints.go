package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// EndpointsOfService resolves the Service port ref names from the Service and its EndpointSlices (those
// of the Service, in any order), as lbplane serves it: the port's target port on each slice, and each
// endpoint's address with Kubernetes' conditions (see endpointConditions), sorted. lbplane serve reads
// them from its cache, lbctl from files: one rule for both.
func EndpointsOfService(ref ServiceRef, svc *corev1.Service, endpointSlices []*discoveryv1.EndpointSlice) ServiceEndpoints {
	grants := Grants(svc.Annotations[GrantAnnotation])
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// Its name could be anything, localhost included, and is not the namespace's to vouch for: lbplane
		// sends Envoy no name a Service points at.
		return ServiceEndpoints{GrantedTo: grants, Err: fmt.Sprintf("Service %s/%s is of type ExternalName, which lbplane does not follow "+
			"(name the host in endpoints, where the operator allows host names)", ref.Namespace, ref.Name)}
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if (ref.PortName != "" && sp.Name == ref.PortName) || (ref.PortName == "" && sp.Port == ref.Port) {
			port = sp
		}
	}
	if port == nil {
		want := ref.PortName
		if want == "" {
			want = strconv.Itoa(int(ref.Port))
		}
		return ServiceEndpoints{GrantedTo: grants, Err: fmt.Sprintf("Service %s/%s has no port %s", ref.Namespace, ref.Name, want)}
	}
	out := ServiceEndpoints{GrantedTo: grants}
	for _, sl := range endpointSlices {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var target int32
		for _, p := range sl.Ports {
			// A slice port carries the Service port's name and the target (container) port.
			if p.Name != nil && *p.Name == port.Name && p.Port != nil {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range sl.Endpoints {
			ready, terminating := endpointConditions(ep.Conditions)
			zone := ""
			if ep.Zone != nil {
				zone = *ep.Zone
			}
			for _, addr := range ep.Addresses {
				out.Endpoints = append(out.Endpoints, ServiceEndpoint{Address: addr, Port: target, Ready: ready, Terminating: terminating, Zone: zone})
			}
		}
	}
	slices.SortFunc(out.Endpoints, func(a, b ServiceEndpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	return out
}

// endpointConditions reads an EndpointSlice endpoint's conditions with Kubernetes' defaults: ready unless it
// says otherwise, and not terminating. A terminating endpoint that still serves is kept (sent to Envoy
// DRAINING); one that stopped serving is neither ready nor terminating, and is left out.
func endpointConditions(c discoveryv1.EndpointConditions) (ready, terminating bool) {
	terminating = c.Terminating != nil && *c.Terminating
	ready = (c.Ready == nil || *c.Ready) && !terminating
	if terminating && c.Serving != nil && !*c.Serving {
		terminating = false
	}
	return ready, terminating
}
