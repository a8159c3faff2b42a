package translate

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// DefaultProxyProtocolTrusted are the senders a PROXY protocol listener trusts when its policy lists none:
// loopback only (a balancer on the same host).
var DefaultProxyProtocolTrusted = []string{"127.0.0.0/8", "::1/128"}

// trafficEdge adds the listener's PROXY protocol and connection rate limit to its edge settings: both are
// per port, so they are owned and compared like the rest of the edge (see edgeConflict).
func trafficEdge(e *ir.Edge, l *v1alpha1.Listener) {
	if pp := l.ProxyProtocol; pp != nil {
		e.AcceptProxyProtocol, e.ProxyProtocolOptional = true, pp.Optional
		trusted := DefaultProxyProtocolTrusted
		if len(pp.TrustedSources) > 0 {
			trusted = pp.TrustedSources
		}
		e.ProxyProtocolTrusted = strings.Join(trusted, ",")
	}
	if rl := l.RateLimit; rl != nil && l.Protocol == v1alpha1.ProtocolTCP {
		e.ConnectionRateLimit = rateLimit(rl)
	}
}

func rateLimit(rl *v1alpha1.RateLimit) ir.RateLimit {
	return ir.RateLimit{Tokens: uint32(rl.Requests), MaxTokens: uint32(*rl.Burst), Interval: rl.Interval.Duration}
}

// trafficCluster adds a backend's PROXY protocol, per-endpoint stats, connection lifetime, balancing knobs
// and client certificate to its cluster.
func trafficCluster(cl *ir.Cluster, b *v1alpha1.Backend) {
	if pp := b.ProxyProtocol; pp != nil {
		cl.ProxyProtocol = string(pp.Version)
	}
	cl.PerEndpointStats = b.PerEndpointStats
	if c := b.Connection; c != nil && c.MaxConnectionDuration != nil {
		d := c.MaxConnectionDuration.Duration
		cl.MaxConnectionDuration = &d
	}
	lb := &b.LoadBalancing
	if lr := lb.LeastRequest; lr != nil && lr.ActiveRequestBias != "" {
		f, _ := strconv.ParseFloat(lr.ActiveRequestBias, 64)
		cl.ActiveRequestBias = &f
	}
	if bu := lb.BackendUtilization; bu != nil && lb.Algorithm == v1alpha1.AlgorithmBackendUtilization {
		pen, _ := strconv.ParseFloat(bu.ErrorUtilizationPenalty, 64)
		cl.Utilization = &ir.Utilization{BlackoutPeriod: bu.BlackoutPeriod.Duration, WeightUpdatePeriod: bu.WeightUpdatePeriod.Duration,
			WeightExpirationPeriod: bu.WeightExpirationPeriod.Duration, ErrorUtilizationPenalty: pen}
	}
	if hc := b.HealthCheck; hc != nil && hc.Passive != nil && cl.Outlier != nil {
		if d := hc.Passive.MaxEjectionTime; d != nil {
			cl.Outlier.MaxEjectionTime = d.Duration
		}
		cl.Outlier.AlwaysEjectOne = hc.Passive.AlwaysEjectOneEndpoint
	}
	if t := b.TLS; t != nil && t.ClientCertificate != nil && cl.TLS != nil {
		cl.TLS.ClientCertSecret = clientCertSecretName(cl.Name)
	}
	if t := b.TLS; t != nil && cl.TLS != nil {
		cl.TLS.AutoSNI = t.AutoSNI
	}
}

func clientCertSecretName(cluster string) string { return objkey.Join(cluster, "client-certificate") }

// caSecretName names the CA bundle a backend's cluster verifies its upstream's certificate with.
func caSecretName(cluster string) string { return objkey.Join(cluster, "ca") }

// trafficRoute adds a route's rate limit, mirrors and retry priorities.
func trafficRoute(p *v1alpha1.LoadBalancerPolicy, route *ir.Route, rt *v1alpha1.Route) {
	if rl := rt.RateLimit; rl != nil {
		r := rateLimit(rl)
		r.Headers = rl.Headers
		route.RateLimit = &r
		if c := rl.PerClient; c != nil {
			route.ClientRateLimit = &ir.ClientRateLimit{MaxClients: uint32(*c.MaxClients),
				Bucket: ir.RateLimit{Tokens: uint32(c.Requests), MaxTokens: uint32(*c.Burst), Interval: c.Interval.Duration}}
		}
	}
	for _, m := range rt.Mirrors {
		if *m.Percent > 0 {
			route.Mirrors = append(route.Mirrors, ir.Mirror{Cluster: clusterName(p, m.Backend), Percent: uint32(*m.Percent)})
		}
	}
	if rr := rt.Retry; rr != nil && rr.AvoidPreviousPriorities && route.Retry != nil {
		route.Retry.AvoidPreviousPriorities = true
	}
}

// backendSecretRefs lists the Secrets a policy's backends reference (client certificates).
func backendSecretRefs(p *v1alpha1.LoadBalancerPolicy) []SecretRef {
	var out []SecretRef
	for _, b := range p.Spec.Backends {
		if t := b.TLS; t != nil && t.ClientCertificate != nil && t.ClientCertificate.SecretName != "" {
			out = append(out, SecretRef{Namespace: p.Namespace, Name: t.ClientCertificate.SecretName})
		}
	}
	return out
}

// SecretRefs lists every Secret a policy references: listener certificates and backend client
// certificates. Kubernetes mode reads these and no other Secret.
func SecretRefs(p *v1alpha1.LoadBalancerPolicy) []SecretRef {
	var out []SecretRef
	if t := p.Spec.Listener.TLS; t != nil {
		for _, c := range t.Certificates {
			if c.SecretName != "" {
				out = append(out, certificateSecret(p, &c))
			}
		}
	}
	return append(out, backendSecretRefs(p)...)
}

// certificateSecret is the Secret a listener certificate names.
func certificateSecret(p *v1alpha1.LoadBalancerPolicy, c *v1alpha1.Certificate) SecretRef {
	return SecretRef{Namespace: cmp.Or(c.SecretNamespace, p.Namespace), Name: c.SecretName}
}

// backendFiles lists the files a policy's backends reference beyond their CA (client certificates).
func backendFiles(p *v1alpha1.LoadBalancerPolicy) []string {
	var out []string
	for _, b := range p.Spec.Backends {
		if t := b.TLS; t != nil && t.ClientCertificate != nil {
			out = append(out, t.ClientCertificate.CertificateFile, t.ClientCertificate.PrivateKeyFile)
		}
	}
	return out
}

// resolveClientCertificates turns the backends' client certificate references into SDS secrets.
func resolveClientCertificates(p *v1alpha1.LoadBalancerPolicy, refs Refs, secrets map[string]*ir.Secret) []string {
	var errs []string
	for i, b := range p.Spec.Backends {
		if b.TLS == nil || b.TLS.ClientCertificate == nil {
			continue
		}
		c := b.TLS.ClientCertificate
		field := fmt.Sprintf("spec.backends[%d].tls.clientCertificate", i)
		name := clientCertSecretName(clusterName(p, b.Name))
		if c.SecretName != "" {
			cert, key, err := tlsSecret(refs, field+".secretName", p.Namespace, c.SecretName)
			if err != "" {
				errs = append(errs, err)
				continue
			}
			secrets[name] = &ir.Secret{Name: name, CertificateChain: cert, PrivateKey: key}
			continue
		}
		cert, key, err := refs.Files.keyPair(field, c.CertificateFile, c.PrivateKeyFile)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		secrets[name] = &ir.Secret{Name: name, CertificateChain: cert, PrivateKey: key}
	}
	return errs
}

// tlsSecret returns a kubernetes.io/tls Secret's certificate and key, or an error that starts with field.
func tlsSecret(refs Refs, field, namespace, name string) (cert, key []byte, errMsg string) {
	sec, ok := refs.Secrets[SecretRef{Namespace: namespace, Name: name}]
	switch {
	case refs.Secrets == nil:
		return nil, nil, field + ": Secrets need Kubernetes mode (lbplane serve --kubernetes)"
	case !ok:
		return nil, nil, fmt.Sprintf("%s: Secret %s/%s not found", field, namespace, name)
	}
	if msg := sec.Problem(SecretRef{Namespace: namespace, Name: name}); msg != "" {
		return nil, nil, field + ": " + msg
	}
	return sec.Cert, sec.Key, ""
}

// Problem says what makes the Secret ref unusable to serve its certificate chain and key ("" when nothing
// does): why it could not be read, or what is wrong with what it holds.
func (sec TLSSecret) Problem(ref SecretRef) string {
	switch {
	case sec.Err != "":
		return sec.Err
	case holdsPrivateKey(sec.Cert):
		// As for certificateFile: the chain goes to Envoy as it is, and shows in its /config_dump.
		return fmt.Sprintf("Secret %s/%s: tls.crt holds a private key; it must hold certificates only", ref.Namespace, ref.Name)
	}
	if _, err := tls.X509KeyPair(sec.Cert, sec.Key); err != nil {
		return fmt.Sprintf("Secret %s/%s: %v", ref.Namespace, ref.Name, err)
	}
	return ""
}
