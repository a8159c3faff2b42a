package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// wsResult is how many WebSocket connections a peer held open at once and what each cost it in memory.
type wsResult struct {
	Peer string `json:"peer"`
	// Kind is "websocket" or "http-idle": keep-alive HTTP/1.1 connections left idle after one request.
	Kind   string `json:"kind,omitempty"`
	Target int    `json:"target"`
	Opened int    `json:"opened"`
	// Alive answered an echo after all were open.
	Alive  int   `json:"alive"`
	Errors int64 `json:"errors"`
	// The peer's resident memory (process tree) before any connection and after each step.
	RSSIdle int64    `json:"rssIdleBytes"`
	Steps   []wsStep `json:"steps"`
	// BytesPerConn is the slope of a least-squares line through the steps.
	BytesPerConn float64 `json:"bytesPerConnection"`
	// HeapPerConn is the same slope through Envoy's allocated heap (admin /memory): live objects only,
	// without what the allocator keeps cached. Envoy peers only.
	HeapPerConn float64 `json:"heapBytesPerConnection,omitempty"`
	OpenSeconds float64 `json:"openSeconds"`
	Note        string  `json:"note,omitempty"`
}

type wsStep struct {
	Conns int   `json:"conns"`
	RSS   int64 `json:"rssBytes"`
	// Heap is Envoy's allocated heap (0 for the other peers).
	Heap int64 `json:"heapAllocatedBytes,omitempty"`
}

// wsScenario opens WebSocket connections through each peer in four steps up to the target, reads the
// peer's memory after each, checks that every connection still echoes, and closes them.
func wsScenario(ctx context.Context, e *env, cfg config, rep *report) error {
	for _, p := range peers(28700) {
		if p.Name == "direct" || p.Name == "lbplane-envoy-lean" || p.optIn || !cfg.runs(cfg.WSPeers, p.Name) {
			continue
		}
		// A fresh peer process for each kind, so that neither measure carries memory over from the other.
		kinds := []string{"http-idle", "websocket"}
		if cfg.WSL4 && p.TCPPort != 0 {
			// The same WebSockets through the peer's TCP (L4) listener: no HTTP layer in the proxy.
			kinds = append(kinds, "websocket-l4")
		}
		for _, kind := range kinds {
			if ctx.Err() != nil {
				break
			}
			res, err := wsOne(ctx, e, cfg, p, kind)
			p.stop()
			if err != nil {
				return fmt.Errorf("%s %s: %w", kind, p.Name, err)
			}
			rep.WebSocket = append(rep.WebSocket, res)
			fmt.Fprintf(os.Stderr, "%-11s %-14s %d of %d open, %d answered again, %.0f bytes/connection, errors %d %s\n",
				kind, p.Name, res.Opened, res.Target, res.Alive, res.BytesPerConn, res.Errors, res.Note)
		}
	}
	return ctx.Err()
}

// conn is a connection held open through a peer: a WebSocket, or an idle keep-alive HTTP/1.1 connection.
type conn interface {
	// again checks the connection still works: an echo, or a second request answered 200.
	again() bool
	Close() error
}

type wsConn struct{ *websocket.Conn }

func (c wsConn) again() bool {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var got string
	return websocket.Message.Send(c.Conn, "ping") == nil && websocket.Message.Receive(c.Conn, &got) == nil && got == "ping"
}

type httpConn struct {
	net.Conn
	r *bufio.Reader
}

// get sends one GET on the connection and reads the answer, leaving the connection open.
func (c httpConn) get() error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: bench\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func (c httpConn) again() bool { return c.get() == nil }

func wsOne(ctx context.Context, e *env, cfg config, p *peer, kind string) (wsResult, error) {
	// Each connection through a proxy is two descriptors in it; HAProxy's maxconn is the limit exactly.
	res := wsResult{Peer: p.Name, Kind: kind, Target: min(cfg.WSConns, e.maxConn-100)}
	if err := p.start(e, p); err != nil {
		return res, err
	}
	dial := func() (conn, error) {
		if kind == "http-idle" {
			nc, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.HTTPPort), 10*time.Second)
			if err != nil {
				return nil, err
			}
			c := httpConn{Conn: nc, r: bufio.NewReader(nc)}
			if err := c.get(); err != nil {
				nc.Close()
				return nil, err
			}
			return c, nil
		}
		port := p.HTTPPort
		if kind == "websocket-l4" {
			port = p.TCPPort
		}
		c, err := websocket.Dial(fmt.Sprintf("ws://127.0.0.1:%d/ws", port), "", fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return nil, err
		}
		// The backend greets with its name: the connection reached it.
		var hello string
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := websocket.Message.Receive(c, &hello); err != nil {
			c.Close()
			return nil, err
		}
		return wsConn{c}, nil
	}
	// One connection first: the path works (Traefik answers 404 until it has loaded its routes), and the
	// peer has allocated what it allocates once.
	var c conn
	var err error
	if !waitFor(20*time.Second, func() bool {
		c, err = dial()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
		return err == nil
	}) {
		return res, fmt.Errorf("first connection: %w", err)
	}
	c.Close()
	time.Sleep(time.Second)
	res.RSSIdle = treeUsage(p.pid()).RSSBytes

	conns := make([]conn, 0, res.Target)
	var mu sync.Mutex
	var errs atomic.Int64
	var firstErr error
	fail := func(err error) {
		if errs.Add(1) == 1 {
			mu.Lock()
			firstErr = err
			mu.Unlock()
		}
	}
	began := time.Now()
	for step := 1; step <= 4 && ctx.Err() == nil; step++ {
		goal := res.Target * step / 4
		var wg sync.WaitGroup
		todo := atomic.Int64{}
		todo.Store(int64(goal - len(conns)))
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for todo.Add(-1) >= 0 && ctx.Err() == nil {
					c, err := dial()
					if err != nil {
						fail(err)
						continue
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		time.Sleep(time.Second)
		step := wsStep{Conns: len(conns), RSS: treeUsage(p.pid()).RSSBytes}
		if strings.Contains(p.Name, "envoy") {
			step.Heap = envoyAllocated(p.HTTPPort + 1000)
		}
		res.Steps = append(res.Steps, step)
	}
	if e.heapDumps != "" && strings.Contains(p.Name, "envoy") {
		if err := saveHeapDump(p.HTTPPort+1000, filepath.Join(e.heapDumps, p.Name+"-"+kind+".pb.gz")); err != nil {
			fmt.Fprintf(os.Stderr, "heap dump of %s: %v\n", p.Name, err)
		}
	}
	res.OpenSeconds = time.Since(began).Seconds()
	res.Opened = len(conns)
	res.Errors = errs.Load()

	// Every connection, all open at once, echoes a message.
	var alive atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < len(conns); j += 32 {
				if conns[j].again() {
					alive.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res.Alive = int(alive.Load())
	for _, c := range conns {
		c.Close()
	}
	res.BytesPerConn = slope(res.Steps, func(s wsStep) int64 { return s.RSS })
	if strings.Contains(p.Name, "envoy") {
		res.HeapPerConn = slope(res.Steps, func(s wsStep) int64 { return s.Heap })
	}
	if res.Opened < res.Target {
		res.Note = fmt.Sprintf("%d connections failed to open, the first with: %v", res.Target-res.Opened, firstErr)
	}
	return res, nil
}

// slope fits y = a + b·conns by least squares and returns b.
func slope(steps []wsStep, y func(wsStep) int64) float64 {
	n := float64(len(steps))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range steps {
		x, y := float64(s.Conns), float64(y(s))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
