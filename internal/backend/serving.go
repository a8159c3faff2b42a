package backend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pires/go-proxyproto"
)

// PeerHeader is the response header that tells the client which address the backend saw the request come
// from: the connection's peer, or the client named by a PROXY protocol header.
const PeerHeader = "X-Peer"

// ForwardedForHeader echoes the request's X-Forwarded-For, so that a test sees what the proxy added.
const ForwardedForHeader = "X-Seen-Forwarded-For"

// LoadHeader is the ORCA per-request load report Envoy reads (endpoint-load-metrics, text format).
const LoadHeader = "endpoint-load-metrics"

// ServeOptions say how a backend accepts connections.
type ServeOptions struct {
	// ProxyProtocol requires a PROXY protocol header (v1 or v2) on every connection; the address it names
	// is the request's remote address.
	ProxyProtocol bool
	// TLS, when set, serves TLS (after the PROXY header, as a proxy sends them).
	TLS *tls.Config
}

// Listen wraps a listener as the options say.
func Listen(lis net.Listener, o ServeOptions) net.Listener {
	if o.ProxyProtocol {
		lis = &proxyproto.Listener{Listener: lis, ReadHeaderTimeout: 10 * time.Second,
			ConnPolicy: func(proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) { return proxyproto.REQUIRE, nil }}
	}
	if o.TLS != nil {
		lis = tls.NewListener(lis, o.TLS)
	}
	return lis
}

// ServerTLS loads a certificate and key to serve; with a client CA file, clients must present a
// certificate it signed (mutual TLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New(clientCAFile + ": no PEM certificate")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// SetUtilization makes every response carry an ORCA load report with this utilization (0 to 1) and the
// backend's measured requests per second; 0 stops reporting.
func (b *Backend) SetUtilization(u float64) { b.orca.utilization.Store(math.Float64bits(u)) }

// loadReport is the state of the ORCA reports.
type loadReport struct {
	utilization atomic.Uint64 // float64 bits
	mu          sync.Mutex
	second      int64 // unix second being counted
	count, last float64
}

// rate counts a request and returns the requests served in the last full second (at least this one), the
// figure Envoy divides by the utilization to weigh the endpoint.
func (l *loadReport) rate(now time.Time) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := now.Unix()
	switch {
	case s == l.second:
	case s == l.second+1:
		l.last, l.count, l.second = l.count, 0, s
	default:
		l.last, l.count, l.second = 0, 0, s
	}
	l.count++
	return max(l.last, l.count)
}

// annotate adds what the backend saw of the request, and its load report, to the response headers.
func (b *Backend) annotate(h http.Header, r *http.Request) {
	h.Set(PeerHeader, r.RemoteAddr)
	if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
		h.Set(ForwardedForHeader, xff)
	}
	// Requests are counted only while reporting: a backend without reports takes no lock per request.
	if u := math.Float64frombits(b.orca.utilization.Load()); u > 0 {
		rps := b.orca.rate(time.Now())
		h.Set(LoadHeader, fmt.Sprintf("TEXT application_utilization=%s,cpu_utilization=%s,rps_fractional=%s",
			strconv.FormatFloat(u, 'f', -1, 64), strconv.FormatFloat(u, 'f', -1, 64), strconv.FormatFloat(rps, 'f', -1, 64)))
	}
}
