package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// TestMemoryPerConnection measures what an idle keep-alive HTTP connection and an open WebSocket cost
// Envoy, with lbplane's 32 KiB connection buffers and with Envoy's 1 MiB, each in a fresh Envoy, as the
// increase of its RSS over an idle baseline at that load (not a peak carried over from other runs).
//
// Measured here (1,000 each, one worker): 16 KiB per idle keep-alive connection and 51.5 KiB per WebSocket
// with either buffer size. The buffer limit caps what a connection may hold under pressure; it allocates
// nothing up front, so idle connections cost the same (Balsa or http-parser made no difference either).
// The goal of 20 KiB per WebSocket is not met; the bounds below guard against regressions.
func TestMemoryPerConnection(t *testing.T) {
	const n = 1000
	for _, tc := range []struct{ name, listener, backend string }{
		{"32KiB buffers (default)", "", ""},
		{"1MiB buffers (Envoy's default)", "    limits: {connectionBufferBytes: 1048576}", "1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := startBackend(t, "mem", 0)
			lb := startLbplane(t)
			envoy := startEnvoy(t, lb, "mem", true)
			port := reservePort(t)
			doc := fmt.Sprintf(`apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: mem}
spec:
  listener:
    address: 127.0.0.1
    port: %d
    protocol: HTTP
%s
  backends:
    - name: app
%s
      endpoints: [{address: 127.0.0.1, port: %d}]
`, port, tc.listener, map[bool]string{true: "      connection: {bufferBytes: " + tc.backend + "}", false: ""}[tc.backend != ""], be.Port)
			push(t, lb, []byte(doc))
			url := fmt.Sprintf("http://127.0.0.1:%d/", port)
			waitServing(t, url, "mem")
			pid := envoy.cmd.Process.Pid
			settle := func() float64 { time.Sleep(500 * time.Millisecond); return rssMiB(t, pid) } // let stats flush
			base := settle()

			// n idle keep-alive HTTP/1.1 connections, each after one request.
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range n {
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: mem\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
					t.Fatal(err)
				}
			}
			http1 := settle()

			// n WebSockets, each echoing one message, held open.
			var wss []*websocket.Conn
			defer func() {
				for _, ws := range wss {
					ws.Close()
				}
			}()
			for range n {
				ws, err := websocket.Dial(fmt.Sprintf("ws://127.0.0.1:%d/ws", port), "", "http://localhost/")
				if err != nil {
					t.Fatal(err)
				}
				wss = append(wss, ws)
				ws.SetDeadline(time.Now().Add(10 * time.Second))
				var hello string
				if err := websocket.Message.Receive(ws, &hello); err != nil {
					t.Fatal(err)
				}
			}
			wsRSS := settle()
			perHTTP := (http1 - base) * 1024 / n
			perWS := (wsRSS - http1) * 1024 / n
			t.Logf("%s: Envoy RSS idle %.1f MiB; +%d keep-alive HTTP connections %.1f MiB (%.1f KiB each); +%d WebSockets %.1f MiB (%.1f KiB each)",
				tc.name, base, n, http1, perHTTP, n, wsRSS, perWS)
			if perHTTP > 32 || perWS > 80 {
				t.Errorf("per connection: %.1f KiB (HTTP keep-alive, bound 32) and %.1f KiB (WebSocket, bound 80)", perHTTP, perWS)
			}
		})
	}
}

// TestAttackHeaderFloodRSSIsBounded: 15,000 connections from one address each send a header
// block of nearly 60 KiB (a listener that raised limits.maxRequestHeadersKB to 60) and then nothing, against
// an Envoy with a heap budget of 512 MiB. Envoy's heap monitor did not count the memory tcmalloc keeps after
// it is freed, and its actions act on new requests, not on connections it is already reading: the process
// grew to 1,176 MiB, more than twice its budget. Now the process, as a container counts it (RSS), stays
// within its budget plus headroomMiB (its memory outside the heap, about 60 MiB, and what the monitor's
// period lets through before Envoy sheds), settles under its budget once the flood is gone, and serves again.
func TestAttackHeaderFloodRSSIsBounded(t *testing.T) {
	t.Parallel()
	exclusive(t, "flood")
	const budgetBytes, headroomMiB = 512 << 20, 256
	e := startEdgeWith(t, "    limits: {maxRequestHeadersKB: 60}", func(p *envoybootstrap.Params) {
		p.MaxConnections, p.MaxHeapBytes = oneHostMaxConnections, budgetBytes
	})
	ensureNoFile(t, e.pid(), oneHostMaxConnections+2000)
	pinCPU(t, e.pid(), envoyCPU)
	if err := renice(e.pid(), -10); err != nil {
		t.Logf("could not raise Envoy's priority (%v)", err)
	}
	const conns = 15000
	budget := float64(budgetBytes) / (1 << 20)
	limit := budget + headroomMiB
	size := maxRequestHeadersKB(t, e.envoy)<<10 - 2048
	if size < 50<<10 {
		t.Fatalf("the listener takes header blocks of %d bytes only: the policy's limits.maxRequestHeadersKB did not reach Envoy", size)
	}
	base := rssMiB(t, e.pid())
	rss := watchRSS(t, e.pid())
	f := startFlood(t, e.addr, attackerIP, conns, size, 30*time.Second)
	res := f.Wait(t)
	peak := rss.Stop()
	t.Logf("%d connections of %d bytes each: %d opened, %d failed to connect, %d closed by Envoy at once, %d closed later, %d still open at the end",
		conns, size, res.Opened, res.DialFailed, res.ClosedAtOnce, res.ClosedLater, res.HeldToEnd)
	t.Logf("Envoy's RSS %.1f MiB before, peak %.1f MiB; heap budget %.0f MiB, limit %.0f MiB", base, peak, budget, limit)
	if res.Opened < conns*9/10 {
		t.Errorf("the attacker opened %d of its %d connections: the flood did not happen as described", res.Opened, conns)
	}
	if peak >= limit {
		t.Errorf("Envoy's RSS peaked at %.1f MiB, over its budget of %.0f MiB plus %d MiB", peak, budget, headroomMiB)
	}
	// The flood's connections are gone: what they took is given back, not kept where no monitor counts it.
	var now float64
	eventually(t, 30*time.Second, "Envoy's RSS settles under its heap budget", func() error {
		if now = rssMiB(t, e.pid()); now >= budget {
			return fmt.Errorf("RSS %.1f MiB, budget %.0f MiB", now, budget)
		}
		return nil
	})
	t.Logf("Envoy's RSS after the flood: %.1f MiB", now)
	waitServing(t, e.url, "recorder")
}
