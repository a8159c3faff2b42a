// Package backend is the sample HTTP backend used by the demo, the end-to-end tests and the benchmarks: it
// answers every request with its name in the X-Backend header and a body of a fixed size, serves a health
// endpoint that can be switched to failing, and echoes WebSocket messages.
package backend

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// Backend is one sample server.
type Backend struct {
	Name  string
	Delay time.Duration
	body  []byte
	// Served counts the requests answered (health probes excluded).
	Served atomic.Int64
	// Probes counts health probes.
	Probes atomic.Int64
	// LastProbeHost is the Host header of the last health probe.
	lastProbeHost atomic.Value
	health        atomic.Int32
	fail          atomic.Int32
	draining      atomic.Bool
	ws            http.Handler
	// orca is the state of the ORCA load reports (see SetUtilization).
	orca loadReport
}

// HealthPath answers health probes: 200 "ok" unless SetHealth said otherwise, 503 once draining.
const HealthPath = "/healthz"

// New returns a backend whose responses have size bytes of body (at least its name and a newline).
func New(name string, size int, delay time.Duration) *Backend {
	line := []byte(name + "\n")
	body := bytes.Repeat([]byte("."), max(size, len(line)))
	copy(body, line)
	if size > len(line) {
		body[len(body)-1] = '\n'
	}
	b := &Backend{Name: name, Delay: delay, body: body}
	b.health.Store(http.StatusOK)
	b.ws = websocket.Handler(b.echo)
	return b
}

// SetHealth sets the status the health endpoint answers with.
func (b *Backend) SetHealth(code int) { b.health.Store(int32(code)) }

// Drain starts the backend's shutdown: from now on its health endpoint answers 503, so that health checks
// take it out, and every response says "Connection: close", so that no client keeps a connection to it that
// the shutdown would cut under a request.
func (b *Backend) Drain() { b.draining.Store(true) }

// FailWith makes every request (but probes) get this status; 0 stops failing.
func (b *Backend) FailWith(code int) { b.fail.Store(int32(code)) }

// LastProbeHost returns the Host header of the last health probe.
func (b *Backend) LastProbeHost() string {
	h, _ := b.lastProbeHost.Load().(string)
	return h
}

// echo sends the backend's name, then echoes every message until the client leaves.
func (b *Backend) echo(c *websocket.Conn) {
	if err := websocket.Message.Send(c, b.Name); err != nil {
		return
	}
	io.Copy(c, c)
}

// ServeHTTP answers with the backend's name. "?status=N" answers with status N; "?delay=D" adds a delay.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == HealthPath {
		b.Probes.Add(1)
		b.lastProbeHost.Store(r.Host)
		if b.draining.Load() {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "draining\n")
			return
		}
		w.WriteHeader(int(b.health.Load()))
		io.WriteString(w, "ok\n")
		return
	}
	b.Served.Add(1)
	if r.URL.Path == "/ws" {
		b.ws.ServeHTTP(w, r)
		return
	}
	if b.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	delay := b.Delay
	if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
		delay = d
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	code := http.StatusOK
	if f := b.fail.Load(); f != 0 {
		code = int(f)
	}
	if s, err := strconv.Atoi(r.URL.Query().Get("status")); err == nil && s >= 200 && s <= 599 {
		code = s
	}
	h := w.Header()
	h.Set("X-Backend", b.Name)
	b.annotate(h, r)
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(b.body)))
	w.WriteHeader(code)
	w.Write(b.body)
}
