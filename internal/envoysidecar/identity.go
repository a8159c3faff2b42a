package envoysidecar

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pki"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// Identity keeps an Envoy pod's own xDS client certificate: it makes a key, which never leaves the pod, and
// asks lbplane (POST /v1/identity) to sign it, proving which pod it is with the pod's projected service
// account token. lbplane names the node (the pod's name) and the group (the pod's label): nothing here
// chooses them. The certificate, key and lbplane's CA go into Dir as the SDS files Envoy watches, each by an
// atomic rename. It renews at two thirds of the certificate's life, and every Check asks lbplane whether the
// certificate is still good: one revoked with its group is replaced at once, without restarting Envoy.
type Identity struct {
	// URL is lbplane's push API (https://...).
	URL string
	// TokenFile is the projected service account token, read at each request (the kubelet renews it).
	TokenFile string
	// CAFile is lbplane's CA certificate (PEM), which lbplane's API certificate must chain to.
	CAFile string
	// ServerName is the name lbplane's certificate must carry (the URL's host when empty).
	ServerName string
	// Dir receives the SDS files and the PEM files (envoybootstrap.WriteCredentials).
	Dir string
	// Check is how often the certificate held is checked with lbplane (30 s when 0).
	Check time.Duration
	Log   *slog.Logger
}

// Obtain gets a new certificate for a new key and writes it into Dir; it returns the certificate.
func (a *Identity) Obtain(ctx context.Context) (*x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, err
	}
	resp, err := a.call(ctx, apiwire.IdentityRequest{CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))})
	if err != nil {
		return nil, err
	}
	cert, err := parseCert([]byte(resp.Certificate))
	if err != nil {
		return nil, fmt.Errorf("lbplane's answer: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	creds := envoybootstrap.Credentials{Cert: []byte(resp.Certificate), Key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), CA: []byte(resp.CA)}
	if err := envoybootstrap.WriteCredentials(a.Dir, creds); err != nil {
		return nil, err
	}
	a.log().Info("obtained this Envoy's certificate", "node", resp.NodeID, "group", resp.ProxyGroup, "serial", resp.Serial,
		"notAfter", resp.NotAfter.UTC().Format(time.RFC3339))
	return cert, nil
}

// Held is the certificate in Dir, if any.
func (a *Identity) Held() (*x509.Certificate, error) {
	b, err := os.ReadFile(filepath.Join(a.Dir, envoybootstrap.CertFile))
	if err != nil {
		return nil, err
	}
	return parseCert(b)
}

// Good asks lbplane whether c is still good for this pod; the reason says why not.
func (a *Identity) Good(ctx context.Context, c *x509.Certificate) (bool, string, error) {
	resp, err := a.call(ctx, apiwire.IdentityRequest{Certificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))})
	if err != nil {
		return false, "", err
	}
	return !resp.Renew, resp.Reason, nil
}

// Ensure leaves a good certificate in Dir: the one there if lbplane says it is good, else a new one.
func (a *Identity) Ensure(ctx context.Context) (*x509.Certificate, error) {
	if c, err := a.Held(); err == nil {
		good, reason, err := a.Good(ctx, c)
		if err != nil {
			return nil, err
		}
		if good {
			return c, nil
		}
		a.log().Info("replacing this Envoy's certificate", "serial", c.SerialNumber.Text(16), "reason", reason)
	}
	return a.Obtain(ctx)
}

// refusedError is lbplane's answer other than 200.
type refusedError struct {
	code int
	msg  string
}

func (e *refusedError) Error() string { return e.msg }

// lasting tells whether err will be the answer again however long one waits: lbplane refused the request
// itself (the token, its pod, a revoked node), or a file of this pod's cannot be read. lbplane not running
// or not reachable yet, busy (429) or failing (5xx) is not.
func lasting(err error) bool {
	var r *refusedError
	if errors.As(err, &r) {
		return r.code >= 400 && r.code < 500 && r.code != http.StatusTooManyRequests && r.code != http.StatusRequestTimeout
	}
	var pe *fs.PathError
	return errors.As(err, &pe)
}

// Wait is Ensure for a pod that starts: until lbplane answers (it may be starting too, or down for a while),
// it tries again with a growing pause of at most maxPause, logging each failure, so that the pod waits,
// unready, rather than failing and being restarted with the kubelet's growing back-off. A refusal that will
// not change (see lasting) is returned at once.
func (a *Identity) Wait(ctx context.Context, maxPause time.Duration) (*x509.Certificate, error) {
	pause := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		c, err := a.Ensure(ctx)
		if err == nil || lasting(err) || ctx.Err() != nil {
			return c, err
		}
		a.log().Warn("lbplane does not give this Envoy a certificate yet; waiting", "attempt", attempt, "next", pause, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPause)
	}
}

// Run keeps the certificate good until ctx ends: it checks it every Check, and replaces it when it is due
// or lbplane refuses it. Failures are retried with a growing pause (at most Check).
func (a *Identity) Run(ctx context.Context) {
	every := a.Check
	if every <= 0 {
		every = 30 * time.Second
	}
	pause := time.Second
	for {
		wait := every
		c, err := a.Ensure(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log().Error("keeping this Envoy's certificate", "error", err)
			wait, pause = pause, min(2*pause, every)
		} else {
			pause = time.Second
			// Never past the renewal time, when the check is rarer than the certificate is short.
			wait = max(min(wait, time.Until(pki.RenewAt(c))), 0)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (a *Identity) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// maxIdentityResponse bounds lbplane's answer: a certificate and the CA.
const maxIdentityResponse = 64 << 10

func (a *Identity) call(ctx context.Context, req apiwire.IdentityRequest) (*apiwire.IdentityResponse, error) {
	token, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("--identity-token: %w", err)
	}
	client, err := a.client()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.URL, "/")+"/v1/identity", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("--identity-url: %w", err)
	}
	hr.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxIdentityResponse))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e apiwire.ErrorBody
		if json.Unmarshal(b, &e) == nil && len(e.Errors) > 0 {
			return nil, &refusedError{code: resp.StatusCode, msg: fmt.Sprintf("lbplane refused: %s: %s", resp.Status, strings.Join(e.Errors, "; "))}
		}
		return nil, &refusedError{code: resp.StatusCode, msg: fmt.Sprintf("lbplane refused: %s", resp.Status)}
	}
	var out apiwire.IdentityResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("lbplane's answer: %w", err)
	}
	return &out, nil
}

// client trusts only lbplane's CA, read again at each call (a ConfigMap mount, rarely changed).
func (a *Identity) client() (*http.Client, error) {
	caPEM, err := os.ReadFile(a.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--identity-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("--identity-ca: no PEM certificate in it")
	}
	return &http.Client{Transport: &http.Transport{Proxy: nil,
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: a.ServerName}}}, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}
