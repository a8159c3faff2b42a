package translate

import (
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

type portKey struct {
	group string
	port  int32
}

type portUse struct {
	address  string
	protocol v1alpha1.Protocol
	owner    Key
	hosts    map[string]Key
	sni      map[string]Key
	edge     ir.Edge // the owner's listener hardening, which the port's listener gets
}

// claim records the policy's use of its port and returns why it cannot have it, or "".
func claim(ports map[portKey]*portUse, p *v1alpha1.LoadBalancerPolicy) string {
	k := portKey{p.Spec.ProxyGroup, p.Spec.Listener.Port}
	l := &p.Spec.Listener
	use, ok := ports[k]
	if !ok {
		use = &portUse{address: l.Address, protocol: l.Protocol, owner: KeyOf(p), hosts: map[string]Key{}, sni: map[string]Key{}, edge: listenerEdge(p)}
		ports[k] = use
	} else {
		switch {
		case use.protocol != l.Protocol:
			return fmt.Sprintf("spec.listener.port: port %d is already used by policy %s with protocol %s", l.Port, use.owner, use.protocol)
		case use.protocol == v1alpha1.ProtocolTCP:
			return fmt.Sprintf("spec.listener.port: port %d is already used by TCP policy %s; a TCP port cannot be shared", l.Port, use.owner)
		case use.address != l.Address:
			return fmt.Sprintf("spec.listener.address: port %d is already bound on %s by policy %s", l.Port, use.address, use.owner)
		case edgeConflict(use.edge, p) != "":
			return edgeConflict(use.edge, p) + fmt.Sprintf(" on port %d than policy %s, which owns the listener", l.Port, use.owner)
		}
	}
	hosts := l.Hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, h := range hosts {
		if owner, taken := use.hosts[h]; taken {
			return fmt.Sprintf("spec.listener.hostnames: hostname %q on port %d is already served by policy %s", h, l.Port, owner)
		}
	}
	names := sniNames(p)
	for _, n := range names {
		if owner, taken := use.sni[n]; taken {
			return fmt.Sprintf("spec.listener.tls: a certificate for %q on port %d is already served by policy %s", n, l.Port, owner)
		}
	}
	for _, h := range hosts {
		use.hosts[h] = KeyOf(p)
	}
	for _, n := range names {
		use.sni[n] = KeyOf(p)
	}
	return ""
}

// sniNames are the server names the policy's certificates are chosen for; "" stands for the default chain.
func sniNames(p *v1alpha1.LoadBalancerPolicy) []string {
	t := p.Spec.Listener.TLS
	if t == nil {
		return nil
	}
	var out []string
	for _, names := range t.CertificateNames(p.Spec.Listener.Hostnames) {
		if len(names) == 0 {
			names = []string{""}
		}
		out = append(out, names...)
	}
	return out
}
