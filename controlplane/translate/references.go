package translate

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// serviceEndpoints turns a Service backend into endpoints: ready addresses serve, terminating ones drain,
// and the others are left out. The message says why the reference does not resolve, if it does not.
func serviceEndpoints(p *v1alpha1.LoadBalancerPolicy, b *v1alpha1.Backend, refs Refs) ([]ir.Endpoint, string) {
	if refs.Services == nil {
		return nil, fmt.Sprintf("Service %s needs Kubernetes mode (lbplane serve --kubernetes)", b.Service.Name)
	}
	ref := ServiceRefOf(p.Namespace, b.Service)
	se, ok := refs.Services[ref]
	if ref.Namespace != p.Namespace && !refs.CrossNamespace && !refs.Granted[objkey.Of(p)] && !(slices.Contains(se.GrantedTo, p.Namespace) || slices.Contains(se.GrantedTo, "*")) {
		// A policy must not send traffic into another team's namespace unless that namespace (the Service's
		// annotation) or the operator allows it. The same words whether the Service exists or not.
		return nil, fmt.Sprintf("Service %s/%s is in another namespace, which is not allowed without a grant (annotation %s: %s on the Service, or lbplane serve --allow-cross-namespace-refs)",
			ref.Namespace, ref.Name, GrantAnnotation, p.Namespace)
	}
	if !ok {
		return nil, fmt.Sprintf("Service %s/%s was not looked up", ref.Namespace, ref.Name)
	}
	if se.Err != "" {
		return nil, se.Err
	}
	var out []ir.Endpoint
	for _, e := range se.Endpoints {
		if !e.Ready && !e.Terminating {
			continue
		}
		// EndpointSlices are written by whoever may write them, not only by Kubernetes from pod IPs.
		if a, err := netip.ParseAddr(e.Address); err != nil {
			return nil, fmt.Sprintf("Service %s/%s: endpoint %q is not an IP address", ref.Namespace, ref.Name, e.Address)
		} else if msg := refs.Reach.CheckEndpoint(a, uint32(e.Port)); msg != "" {
			return nil, fmt.Sprintf("Service %s/%s: %s", ref.Namespace, ref.Name, msg)
		}
		out = append(out, ir.Endpoint{Address: e.Address, Port: uint32(e.Port), Weight: 1, Draining: !e.Ready, Zone: e.Zone})
	}
	slices.SortFunc(out, func(a, b ir.Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	return out, ""
}

// resolveFiles turns the policy's file and Secret references into SDS secrets, or says what is wrong with
// them.
func resolveFiles(p *v1alpha1.LoadBalancerPolicy, refs Refs) (map[string]*ir.Secret, []string) {
	files := refs.Files
	secrets := map[string]*ir.Secret{}
	var errs []string
	if t := p.Spec.Listener.TLS; t != nil {
		for i, c := range t.Certificates {
			name := fmt.Sprintf("%s/%s/certificate-%d", p.Namespace, p.Name, i)
			if c.SecretName != "" {
				ref := certificateSecret(p, &c)
				if ref.Namespace != p.Namespace && !refs.CrossNamespace && !refs.Granted[objkey.Of(p)] {
					// A policy must not serve another team's certificate and key unless the operator allows it.
					errs = append(errs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretNamespace: Secret %s/%s is in another namespace, which is not allowed (lbplane serve --allow-cross-namespace-refs)",
						i, ref.Namespace, ref.Name))
					continue
				}
				cert, key, msg := tlsSecret(refs, fmt.Sprintf("spec.listener.tls.certificates[%d].secretName", i), ref.Namespace, ref.Name)
				if msg != "" {
					errs = append(errs, msg)
				} else {
					secrets[name] = &ir.Secret{Name: name, CertificateChain: cert, PrivateKey: key}
				}
				continue
			}
			cert, key, err := files.keyPair(fmt.Sprintf("spec.listener.tls.certificates[%d]", i), c.CertificateFile, c.PrivateKeyFile)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			secrets[name] = &ir.Secret{Name: name, CertificateChain: cert, PrivateKey: key}
		}
	}
	for i, b := range p.Spec.Backends {
		if b.TLS == nil || b.TLS.CAFile == "" {
			continue
		}
		ca, err := files.caBundle(fmt.Sprintf("spec.backends[%d].tls.caFile", i), b.TLS.CAFile)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		name := caSecretName(clusterName(p, b.Name))
		secrets[name] = &ir.Secret{Name: name, CA: ca}
	}
	errs = append(errs, resolveClientCertificates(p, refs, secrets)...)
	return secrets, errs
}
