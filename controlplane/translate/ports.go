package translate

import "github.com/lbplane/lbplane/api/v1alpha1"

// portKey is one port of one proxy group.
type portKey struct {
	group string
	port  int32
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
