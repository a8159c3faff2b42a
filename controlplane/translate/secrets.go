package translate

// The Secrets and files a policy's certificates come from, and the SDS secrets they become.

import (
	"cmp"
	"crypto/tls"
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// clientCertSecretName names the client certificate a backend's cluster presents to its upstream.
func clientCertSecretName(cluster string) string { return objkey.Join(cluster, "client-certificate") }

// caSecretName names the CA bundle a backend's cluster verifies its upstream's certificate with.
func caSecretName(cluster string) string { return objkey.Join(cluster, "ca") }

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
