package lbctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// renderGRPC writes a proxyless gRPC client's xDS bootstrap (lbctl bootstrap --grpc): it asks lbplane for
// the node's certificate, writes it with lbplane's CA into the client's directory (mode 0700) as
// envoyBootstrap.WriteCredentials does for Envoy, and points the bootstrap at those files.
func (b *bootstrapFlags) renderGRPC(ctx context.Context, g *globals, stdout, stderr io.Writer) error {
	switch {
	case b.embed:
		return errors.New("--embed: a gRPC client reads its certificate from files (--out-dir)")
	case b.tls.Cert != "" || b.tls.Key != "" || b.tls.CA != "" || b.tls.Dir != "":
		return errors.New("--grpc: takes the certificate lbplane issues (or --xds-insecure), not --xds-tls-*")
	}
	group := b.p.Group
	if group == "" {
		group = v1alpha1.DefaultProxyGroup
	}
	p := envoybootstrap.GRPCParams{NodeID: b.p.NodeID, Group: group, Zone: b.p.Zone, XDS: b.xdsAddrs, Insecure: b.insecure}
	if !b.insecure {
		p.CredsDir = b.dir
	}
	// Check the flags before asking lbplane for a certificate.
	out, err := envoybootstrap.GRPCBootstrap(p)
	if err != nil {
		return err
	}
	if !b.insecure {
		c, err := g.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		issued, err := c.IssueCertificate(ctx, p.NodeID, group)
		if err != nil {
			return fmt.Errorf("getting a certificate for node %q from lbplane: %w", p.NodeID, err)
		}
		if err := privateDir("--out-dir", b.dir); err != nil {
			return err
		}
		if err := envoybootstrap.WriteCredentials(b.dir, envoybootstrap.Credentials{Cert: []byte(issued.Certificate), Key: []byte(issued.PrivateKey), CA: []byte(issued.CA)}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "certificate for gRPC client %s (group %s) in %s, valid until %s; run this again before then to renew (gRPC reads the files again every 10 minutes)\n",
			p.NodeID, group, b.dir, issued.NotAfter.UTC().Format(time.RFC3339))
	}
	_, err = stdout.Write(out)
	return err
}
