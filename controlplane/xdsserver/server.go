package xdsserver

import (
	"context"
	"math"
	"net"
	"syscall"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	sotwv3 "github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// Limits set on purpose rather than left to gRPC's defaults.
const (
	// A large fleet config (10,000 policies) is tens of MiB in one CDS response; gRPC's default 4 MiB would
	// make Envoy drop the stream and retry forever.
	maxSendBytes = 512 << 20
	// Requests are small; a NACK's error detail is the largest part.
	maxRecvBytes = 16 << 20
	// Envoys send keepalive PINGs (bootstrap: 4 s after the last answer, plus jitter); allow down to 2 s,
	// refuse anything faster. gRPC counts a PING that comes sooner than this after the previous one, with
	// no response sent between them, as a strike and closes the connection at the third (too_many_pings):
	// a limit at the bootstrap's own interval would close healthy Envoys on an idle stream whenever one
	// PING was read late and the next on time.
	keepaliveMinTime = 2 * time.Second
	// lbplane sends no HTTP/2 PINGs of its own (a Time of "infinity", see NewGRPC): Envoy answers a PING on
	// its main thread, which applying a large config holds for minutes (50,000 clusters: over 5 minutes on
	// a loaded 2-core machine, bench/results/2026-11-23-vm-incremental section 4.3), so any PING timeout
	// short enough to be useful disconnects a busy Envoy, which then starts over. (gRPC's and Istio's 30 s +
	// 10 s did: the connection was closed 42 s after the Envoy connected.) A vanished Envoy (power loss,
	// partition) is found by TCP keepalive instead, which the peer's kernel answers however busy Envoy is:
	// an idle connection is probed after tcpKeepaliveIdle and closed after tcpKeepaliveCount unanswered
	// probes, tcpKeepaliveInterval apart (about a minute). A peer that vanishes with lbplane's data in flight
	// is found by TCP retransmission timeouts (the kernel's tcp_retries2, ~15 minutes).
	tcpKeepaliveIdle     = 30 * time.Second
	tcpKeepaliveInterval = 10 * time.Second
	tcpKeepaliveCount    = 3
	// An Envoy opens one ADS stream per connection; a handful leaves room for a reconnecting one and for
	// tools, and keeps one connection from opening thousands of streams (each a goroutine and watches).
	maxStreamsPerConn = 16
	// A connection must finish its TLS handshake in this time, or it is closed: a client that connects and
	// says nothing holds a file descriptor only briefly.
	handshakeTimeout = 10 * time.Second
	// Requests carry a node and resource names; 1 MiB of headers is far more than any of them needs.
	maxHeaderBytes = 1 << 20
)

// fanoutOptions make a change cheaper to send to many Envoys, for the same bytes on the wire (measured with
// 10,000 simulated Envoys: bench/results/2026-11-23-vm-incremental section 5.6):
//   - Static flow-control windows. With gRPC's default (dynamic) windows, lbplane sends a BDP PING with
//     nearly every ACK it reads, and reads the PING's answer: twice the system calls per response and proxy.
//     Requests are small; a 1 MiB window still takes the largest NACK's error detail in a few round trips.
//     The largest request is a large Envoy's first EDS subscription (every cluster's name: over 2 MB at
//     100,000 clusters). With the dynamic windows a 50,000-cluster Envoy stopped after 265,877 bytes of it
//     and never finished (section 5.5); with these static ones, 50,000- and 100,000-cluster cold starts
//     complete (section 5.8). A static window also bounds what one stream can make lbplane buffer.
//   - A 16 KiB write buffer instead of 32 KiB: a small object for the allocator and garbage collector, where
//     32 KiB is a large one. Large responses are written 16 KiB at a time, the size of an HTTP/2 frame.
//   - Each connection keeps its write buffer. By default gRPC takes one from a shared pool for every flush
//     and holds it while its writer yields to batch more (an xDS response is usually under its 1,000-byte
//     batch); a change answers thousands of streams at once, so the pool runs dry and every stream allocates
//     a new buffer, which the pool drops at the next collections: 16 KiB of garbage per stream and change,
//     53 MB per change at 3,333 streams. After a fleet connects that was enough to start a collection in
//     the middle of the first change, and each collection (24 MB of goroutine stacks and 100-150 MB of heap
//     to mark) doubled that change's time for the replica's Envoys (bench/results/2026-11-27-vm-ha). Kept,
//     the buffers cost about 5 KiB more RSS per connection than the pool's churn did. No buffer at all
//     (WriteBufferSize 0) writes every response in three system calls (frame header, gRPC header, message).
//     gRPC marks the option deprecated (sharing is its default) but keeps it; should it go, this choice
//     comes back with it.
var fanoutOptions = []grpc.ServerOption{
	grpc.StaticStreamWindowSize(1 << 20),
	grpc.StaticConnWindowSize(1 << 20),
	grpc.WriteBufferSize(16 << 10),
	//lint:ignore SA1019 a change to thousands of streams must not allocate a write buffer for each (above)
	grpc.SharedWriteBuffer(false),
}

// NewGRPC returns a gRPC server serving ADS from cache, with tracker recording every exchange.
func NewGRPC(ctx context.Context, cache *xdscache.Cache, tracker *Tracker, extra ...grpc.ServerOption) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.MaxSendMsgSize(maxSendBytes),
		grpc.MaxRecvMsgSize(maxRecvBytes),
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		// Time "infinity" turns lbplane's PINGs off (and gRPC's TCP_USER_TIMEOUT with them); see
		// tcpKeepaliveIdle. Envoy's own PINGs (bootstrap) are still answered.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Duration(math.MaxInt64)}),
	}, fanoutOptions...)
	opts = append(opts, extra...)
	g := grpc.NewServer(opts...)
	// Ordered ADS sends responses in the order the cache produced them (clusters, endpoints, listeners,
	// routes); the delta server always does.
	// The cache hears of streams, requests and nonces first: it gives each stream its own make-before-break
	// steps as it answers them.
	// A stream the cache retires at its maximum age is ended by closing its connection (see maxage.go).
	cache.OnRetire = tracker.retire
	srv := serverv3.NewServer(ctx, cache, cacheCallbacks(cache, tracker), sotwv3.WithOrderedADS())
	discovery.RegisterAggregatedDiscoveryServiceServer(g, srv)
	return g
}

// Serve runs g on lis until ctx ends, then stops it gracefully (bounded).
func Serve(ctx context.Context, g *grpc.Server, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			g.Stop()
		}
		return nil
	}
}

// Listen listens on addr for xDS connections, with the TCP keepalive that finds a vanished Envoy (see
// tcpKeepaliveIdle).
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: tcpKeepaliveIdle, Interval: tcpKeepaliveInterval, Count: tcpKeepaliveCount,
	}}
	return lc.Listen(ctx, "tcp", addr)
}

// LimitConnections caps the connections open at once on lis. When the cap is reached, Accept waits for one
// to close, and further clients wait in the kernel's backlog (or are refused) instead of taking file
// descriptors lbplane needs for its push API, health endpoint, store and the Envoys already connected.
func LimitConnections(lis net.Listener, max int) net.Listener {
	if max <= 0 {
		return lis
	}
	return netutil.LimitListener(lis, max)
}

// DefaultMaxConnections derives the xDS connection cap from the process's file descriptor limit: half of
// it, leaving the other half for everything else (Go raises the soft limit to the hard one at start).
func DefaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur > 1<<20 {
		return 10000
	}
	return int(rl.Cur / 2)
}
