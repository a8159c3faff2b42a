// Package backend is the sample HTTP backend used by the demo, the end-to-end tests and the benchmarks: it
// answers every request with its name in the X-Backend header and a body of a fixed size.
package backend

import (
	"bytes"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Backend is one sample server.
type Backend struct {
	Name  string
	Delay time.Duration
	body  []byte
	// Served counts the requests answered.
	Served atomic.Int64
}

// New returns a backend whose responses have size bytes of body (at least its name and a newline).
func New(name string, size int, delay time.Duration) *Backend {
	line := []byte(name + "\n")
	body := bytes.Repeat([]byte("."), max(size, len(line)))
	copy(body, line)
	if size > len(line) {
		body[len(body)-1] = '\n'
	}
	return &Backend{Name: name, Delay: delay, body: body}
}

// ServeHTTP answers with the backend's name. "?status=N" answers with status N; "?delay=D" adds a delay.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.Served.Add(1)
	delay := b.Delay
	if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil {
		delay = d
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	code := http.StatusOK
	if s, err := strconv.Atoi(r.URL.Query().Get("status")); err == nil && s >= 200 && s <= 599 {
		code = s
	}
	h := w.Header()
	h.Set("X-Backend", b.Name)
	h.Set("Content-Type", "text/plain")
	h.Set("Content-Length", strconv.Itoa(len(b.body)))
	w.WriteHeader(code)
	w.Write(b.body)
}
