package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// wsResult is how many WebSocket connections a peer held open at once and what each cost it in memory.
type wsResult struct {
	Peer   string `json:"peer"`
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
	OpenSeconds  float64 `json:"openSeconds"`
	Note         string  `json:"note,omitempty"`
}

type wsStep struct {
	Conns int   `json:"conns"`
	RSS   int64 `json:"rssBytes"`
}

// wsScenario opens WebSocket connections through each peer in four steps up to the target, reads the
// peer's memory after each, checks that every connection still echoes, and closes them.
func wsScenario(ctx context.Context, e *env, cfg config, rep *report) error {
	for _, p := range peers(28700) {
		if p.Name == "direct" || p.Name == "lbplane-envoy-lean" || p.optIn || !cfg.runs(cfg.WSPeers, p.Name) {
			continue
		}
		res, err := wsOne(ctx, e, cfg, p)
		p.stop()
		if err != nil {
			return fmt.Errorf("websocket %s: %w", p.Name, err)
		}
		rep.WebSocket = append(rep.WebSocket, res)
		fmt.Fprintf(os.Stderr, "websocket   %-14s %d of %d open, %d echoed, %.0f bytes/connection, errors %d %s\n",
			p.Name, res.Opened, res.Target, res.Alive, res.BytesPerConn, res.Errors, res.Note)
	}
	return ctx.Err()
}

func wsOne(ctx context.Context, e *env, cfg config, p *peer) (wsResult, error) {
	// Each connection through a proxy is two descriptors in it; HAProxy's maxconn is the limit exactly.
	res := wsResult{Peer: p.Name, Target: min(cfg.WSConns, e.maxConn-100)}
	if err := p.start(e, p); err != nil {
		return res, err
	}
	url := fmt.Sprintf("ws://127.0.0.1:%d/ws", p.HTTPPort)
	origin := fmt.Sprintf("http://127.0.0.1:%d/", p.HTTPPort)
	// One connection first: the path works (Traefik answers 404 until it has loaded its routes), and the
	// peer has allocated what it allocates once.
	var c *websocket.Conn
	var err error
	if !waitFor(20*time.Second, func() bool {
		c, err = websocket.Dial(url, "", origin)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
		return err == nil
	}) {
		return res, fmt.Errorf("first WebSocket: %w", err)
	}
	c.Close()
	time.Sleep(time.Second)
	res.RSSIdle = treeUsage(p.pid()).RSSBytes

	conns := make([]*websocket.Conn, 0, res.Target)
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
					c, err := websocket.Dial(url, "", origin)
					if err != nil {
						fail(err)
						continue
					}
					// The backend greets with its name: the connection reached it.
					var hello string
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if err := websocket.Message.Receive(c, &hello); err != nil {
						fail(err)
						c.Close()
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
		res.Steps = append(res.Steps, wsStep{Conns: len(conns), RSS: treeUsage(p.pid()).RSSBytes})
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
				c := conns[j]
				c.SetDeadline(time.Now().Add(10 * time.Second))
				var got string
				if websocket.Message.Send(c, "ping") == nil && websocket.Message.Receive(c, &got) == nil && got == "ping" {
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
	res.BytesPerConn = slope(res.Steps)
	if res.Opened < res.Target {
		res.Note = fmt.Sprintf("%d connections failed to open, the first with: %v", res.Target-res.Opened, firstErr)
	}
	return res, nil
}

// slope fits rss = a + b·conns by least squares and returns b.
func slope(steps []wsStep) float64 {
	n := float64(len(steps))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range steps {
		x, y := float64(s.Conns), float64(s.RSS)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
