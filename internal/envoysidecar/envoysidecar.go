// Package envoysidecar is what the chart runs beside each Envoy, from lbplane's own image (lbctl
// envoy-sidecar), so that the Envoy container needs neither a shell nor perl: Envoy's image may be distroless.
// It speaks to Envoy's admin on its Unix socket (admin has no TCP port) and offers the kubelet two HTTP
// endpoints in its place:
//
//   - GET /envoy/alive, Envoy's liveness: 200 while admin answers GET /server_info, which it does from
//     Envoy's start. No listener of Envoy's can serve it: none accepts before lbplane's config is loaded, and
//     an Envoy waiting for lbplane must not be restarted.
//   - GET /shutdown, Envoy's preStop hook: it waits for the drain that the sidecar's own SIGTERM starts
//     (the kubelet sends it at once to a container without a preStop hook, while it runs Envoy's), and
//     answers once Envoy has nothing in flight; then the kubelet stops Envoy. The request starts nothing by
//     itself: anyone who can reach the port can make it wait, but not drain Envoy.
package envoysidecar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sidecar serves Envoy's liveness and runs its drain at shutdown.
type Sidecar struct {
	// AdminSocket is Envoy's admin Unix socket.
	AdminSocket string
	// DrainTime is how long Envoy keeps accepting after the drain starts, answering each request with
	// Connection: close (the Service may still send new connections while it learns that the pod goes);
	// WaitTime bounds the wait for open requests and TCP connections to end after that.
	DrainTime, WaitTime time.Duration
	// TermWait is how long GET /shutdown waits for the sidecar's SIGTERM before it answers that the pod is
	// not terminating (2 s when 0).
	TermWait time.Duration
	Log      *slog.Logger

	once        sync.Once
	admin       *http.Client
	terminating chan struct{}
	drained     chan struct{}
	result      string
}

func (h *Sidecar) init() {
	h.once.Do(func() {
		h.admin = &http.Client{Timeout: 4 * time.Second, Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", h.AdminSocket)
			}}}
		h.terminating = make(chan struct{})
		h.drained = make(chan struct{})
		if h.Log == nil {
			h.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// adminDo calls Envoy's admin.
func (h *Sidecar) adminDo(ctx context.Context, method, path string) (string, error) {
	h.init()
	req, err := http.NewRequestWithContext(ctx, method, "http://envoy-admin"+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := h.admin.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("admin %s %s: %s", method, path, resp.Status)
	}
	return string(b), nil
}

// Handler serves /healthz (the sidecar), /envoy/alive and /shutdown.
func (h *Sidecar) Handler() http.Handler {
	h.init()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /envoy/alive", func(w http.ResponseWriter, r *http.Request) {
		if _, err := h.adminDo(r.Context(), http.MethodGet, "/server_info"); err != nil {
			http.Error(w, "Envoy's admin does not answer: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /shutdown", func(w http.ResponseWriter, r *http.Request) {
		wait := h.TermWait
		if wait <= 0 {
			wait = 2 * time.Second
		}
		select {
		case <-h.terminating:
		case <-time.After(wait):
			io.WriteString(w, "not terminating: nothing to wait for\n")
			return
		case <-r.Context().Done():
			return
		}
		select {
		case <-h.drained:
			io.WriteString(w, h.result+"\n")
		case <-r.Context().Done():
		}
	})
	return mux
}

// Terminate starts the drain (once): the pod is going.
func (h *Sidecar) Terminate(ctx context.Context) {
	h.init()
	select {
	case <-h.terminating:
		return
	default:
	}
	close(h.terminating)
	go func() {
		busy, err := h.Drain(ctx)
		switch {
		case err != nil:
			h.result = "drain failed: " + err.Error()
		case busy > 0:
			h.result = fmt.Sprintf("waited %s; %d requests or connections still open", h.WaitTime, busy)
		default:
			h.result = "drained"
		}
		h.Log.Info("Envoy drained", "result", h.result)
		close(h.drained)
	}()
}

// Drain drains Envoy's listeners gracefully, keeps it accepting for DrainTime, and then waits at most
// WaitTime for its traffic listeners to have nothing in flight. It returns what was still in flight.
func (h *Sidecar) Drain(ctx context.Context) (int, error) {
	if _, err := h.adminDo(ctx, http.MethodPost, "/drain_listeners?graceful"); err != nil {
		return 0, err
	}
	h.Log.Info("draining Envoy's listeners", "accepting for", h.DrainTime, "then waiting at most", h.WaitTime)
	select {
	case <-time.After(h.DrainTime):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	end := time.Now().Add(h.WaitTime)
	for {
		stats, err := h.adminDo(ctx, http.MethodGet, "/stats?filter=active")
		if err != nil {
			return 0, err
		}
		busy := Busy(stats)
		if busy <= 0 || !time.Now().Before(end) {
			return max(busy, 0), nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return busy, ctx.Err()
		}
	}
}

var (
	notTraffic = regexp.MustCompile(`^(listener|http)\.(admin|lbplane_stats)\.|\.worker_[0-9]+\.`)
	listenerCx = regexp.MustCompile(`^listener\..*\.downstream_cx_active$`)
	httpCx     = regexp.MustCompile(`^http\..*\.downstream_cx_active$`)
	httpRq     = regexp.MustCompile(`^http\..*\.downstream_rq_active$`)
)

// Busy is what is in flight on Envoy's traffic listeners, from admin's /stats text: requests, and
// connections that are not HTTP (a TCP listener's). Idle HTTP keep-alive connections do not count: Envoy does
// not close them on drain, and a client finds them closed before it sends on them. Admin's and the stats
// listener's own, and the per-worker copies of the listener gauges, are left out.
func Busy(stats string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(stats))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok || notTraffic.MatchString(name) {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			continue
		}
		switch {
		case listenerCx.MatchString(name):
			n += v
		case httpCx.MatchString(name):
			n -= v
		case httpRq.MatchString(name):
			n += v
		}
	}
	return n
}

// Serve serves Handler on lis until ctx ends; at the first signal on term it starts the drain and keeps
// serving until the drain is over and GET /shutdown had linger to be answered, or ctx ends.
func (h *Sidecar) Serve(ctx context.Context, lis net.Listener, term <-chan struct{}, linger time.Duration) error {
	h.init()
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case <-term:
		h.Terminate(ctx)
		select {
		case <-h.drained:
		case <-ctx.Done():
		}
		select {
		case <-time.After(linger):
		case <-ctx.Done():
		}
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
