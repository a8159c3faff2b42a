package translate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// addChains adds the policy's certificates to an HTTPS listener, one filter chain each.
func addChains(l *ir.Listener, p *v1alpha1.LoadBalancerPolicy, t *v1alpha1.ListenerTLS) {
	if l.TLS == nil {
		l.TLS = &ir.ListenerTLS{Default: -1, MinVersion: tlsVersion(t.MinVersion), MaxVersion: tlsVersion(t.MaxVersion), Ciphers: t.CipherSuites}
	}
	for i, names := range t.CertificateNames(p.Spec.Listener.Hostnames) {
		chain := ir.TLSChain{ServerNames: slices.Clone(names), Secret: fmt.Sprintf("%s/%s/certificate-%d", p.Namespace, p.Name, i)}
		l.TLS.Chains = append(l.TLS.Chains, chain)
		// The certificate without hostnames answers clients without SNI (or with an unknown name); when there
		// is none, the oldest policy's first certificate does.
		if len(t.Certificates[i].Hostnames) == 0 || len(l.TLS.Chains) == 1 {
			l.TLS.Default = len(l.TLS.Chains) - 1
		}
	}
}

func tlsVersion(v v1alpha1.TLSVersion) string {
	if v == v1alpha1.TLSv13 {
		return "TLSv1_3"
	}
	return "TLSv1_2"
}

func listenerFor(g *ir.Group, p *v1alpha1.LoadBalancerPolicy) *ir.Listener {
	port := uint32(p.Spec.Listener.Port)
	for _, l := range g.Listeners {
		if l.Port == port {
			return l
		}
	}
	proto := ir.HTTP
	if p.Spec.Listener.Protocol == v1alpha1.ProtocolTCP {
		proto = ir.TCP
	}
	l := &ir.Listener{Name: fmt.Sprintf("%s-%d", strings.ToLower(string(p.Spec.Listener.Protocol)), port), Address: p.Spec.Listener.Address, Port: port, Protocol: proto, Edge: listenerEdge(p)}
	g.Listeners = append(g.Listeners, l)
	return l
}

// domains lists the Host values Envoy matches; the listener strips any port from Host before matching.
func domains(hostnames []string) []string {
	if len(hostnames) == 0 {
		return []string{"*"}
	}
	return slices.Clone(hostnames)
}

// sortVirtualHosts puts a listener's virtual hosts in the IR's order (ir.CompareVirtualHosts).
func sortVirtualHosts(vhs []*ir.VirtualHost) {
	slices.SortStableFunc(vhs, ir.CompareVirtualHosts)
}
