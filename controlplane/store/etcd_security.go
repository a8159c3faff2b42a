package store

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// An etcd anyone can write is an lbplane anyone can configure: records they write are refused (etcd_auth.go),
// but they can still read the policies, delete them and hold the election. So etcd is refused unless it is
// reached over TLS with a client certificate, and unless it turns away a client that presents none (the
// probe below), or the operator accepts that with --insecure-etcd.

// checkEtcdSecurity says what is insecure about reaching etcd as cfg says; without cfg.Insecure any of it is
// an error.
func checkEtcdSecurity(cfg EtcdConfig, tlsConfig *tls.Config) ([]string, error) {
	var why []string
	var plain []string
	for _, ep := range cfg.Endpoints {
		if !endpointTLS(ep, tlsConfig) {
			plain = append(plain, ep)
		}
	}
	if len(plain) > 0 {
		why = append(why, "etcd is reached in plaintext ("+strings.Join(plain, ", ")+"): lbplane's records cross the network readable and writable by anyone on the path")
	}
	if cfg.Cert == "" {
		why = append(why, "lbplane presents no client certificate to etcd (--etcd-cert, --etcd-key): an etcd that takes lbplane without one takes anyone")
	}
	if len(why) > 0 && !cfg.Insecure {
		return nil, errors.New(strings.Join(why, "; ") + ". Use https:// endpoints with --etcd-cacert, --etcd-cert and --etcd-key " +
			"against an etcd started with --client-cert-auth (docs/ha.md), or accept an etcd anyone can write with --insecure-etcd")
	}
	if cfg.Insecure {
		if ep, open := openToAnyone(cfg.Endpoints, tlsConfig, "", time.Second); open && len(why) == 0 {
			why = append(why, "etcd "+ep+" answers clients that present no certificate")
		}
		if len(why) == 0 {
			why = append(why, "etcd is accepted without the checks that refuse plaintext or unauthenticated etcd")
		}
	}
	return why, nil
}

// endpointTLS says whether lbplane's client reaches ep over TLS: https:// (and unixs://) always, an
// endpoint without a scheme when TLS is configured.
func endpointTLS(ep string, tlsConfig *tls.Config) bool {
	scheme, _, found := strings.Cut(ep, "://")
	if !found {
		return tlsConfig != nil
	}
	return scheme == "https" || scheme == "unixs"
}

// openToAnyone asks every endpoint (at once) for a count of the keys under prefix as a client that
// presents no certificate, no user and no token, and returns one that answers: an etcd without
// --client-cert-auth and without authentication. An etcd that refuses (the TLS handshake, or "user name is
// empty"), or that does not answer within timeout, is not taken for open.
func openToAnyone(endpoints []string, tlsConfig *tls.Config, prefix string, timeout time.Duration) (string, bool) {
	open := make(chan string, len(endpoints))
	var wg sync.WaitGroup
	for _, ep := range endpoints {
		if strings.HasPrefix(ep, "unix") {
			continue
		}
		wg.Go(func() {
			if answersAnyone(ep, tlsConfig, prefix, timeout) {
				open <- ep
			}
		})
	}
	wg.Wait()
	close(open)
	ep, ok := <-open
	return ep, ok
}

func answersAnyone(ep string, tlsConfig *tls.Config, prefix string, timeout time.Duration) bool {
	host := ep
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		host = u.Host
	}
	creds := insecure.NewCredentials()
	if endpointTLS(ep, tlsConfig) {
		anon := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsConfig != nil {
			anon.RootCAs = tlsConfig.RootCAs
		}
		creds = credentials.NewTLS(anon)
	}
	conn, err := grpc.NewClient("passthrough:///"+host, grpc.WithTransportCredentials(creds))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = etcdserverpb.NewKVClient(conn).Range(ctx, &etcdserverpb.RangeRequest{Key: []byte(prefix + etcdVersion), CountOnly: true, Serializable: true})
	return err == nil
}
