package xdsserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// capturing hands every accepted connection to conns, so the test can read its socket options.
type capturing struct {
	net.Listener
	conns chan net.Conn
}

func (c capturing) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.conns <- conn
	}
	return conn, err
}

func sockopt(t *testing.T, conn net.Conn, level, name int) int {
	t.Helper()
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, name) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// An Envoy busy applying a large config cannot answer HTTP/2 PINGs, so liveness of an xDS connection is left
// to TCP keepalive, which its kernel answers: the accepted connection probes after 30 s, and gRPC set no
// TCP_USER_TIMEOUT (it does whenever its server PINGs are on, and closes the connection on a late ack).
func TestXDSConnectionLivenessIsTCPKeepaliveNotPings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lis, err := xdsserver.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := capturing{Listener: lis, conns: make(chan net.Conn, 4)}
	cache := xdscache.New()
	g := xdsserver.NewGRPC(ctx, cache, xdsserver.NewTracker(cache, slog.New(slog.NewTextHandler(io.Discard, nil))))
	done := make(chan struct{})
	go func() { xdsserver.Serve(ctx, g, cl); close(done) }()
	defer func() { cancel(); <-done }()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Connect()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(wctx, s) {
			t.Fatalf("gRPC client never became ready (state %v)", s)
		}
	}
	// Ready means the server's transport was built, socket options included.
	var accepted net.Conn
	select {
	case accepted = <-cl.conns:
	default:
		t.Fatal("the client is ready but the server accepted no connection")
	}
	if got := sockopt(t, accepted, unix.SOL_SOCKET, unix.SO_KEEPALIVE); got == 0 {
		t.Error("SO_KEEPALIVE is off on the accepted xDS connection")
	}
	if got := sockopt(t, accepted, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); got != 30 {
		t.Errorf("TCP_KEEPIDLE = %d s, want 30", got)
	}
	if got := sockopt(t, accepted, unix.IPPROTO_TCP, unix.TCP_KEEPCNT); got != 3 {
		t.Errorf("TCP_KEEPCNT = %d, want 3", got)
	}
	if got := sockopt(t, accepted, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); got != 0 {
		t.Errorf("TCP_USER_TIMEOUT = %d ms: gRPC's server keepalive PINGs are on and would drop a busy Envoy", got)
	}
}

// Envoys PING their replica to notice a silent one (the bootstrap: 4 s after the last answer, 4 s
// timeout). lbplane answers PINGs that come 2 s or more apart on an idle connection for as long as they
// come, and closes a connection that PINGs faster (gRPC's too_many_pings after three strikes).
func TestXDSKeepalivePingsEveryTwoSecondsAreAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lis, err := xdsserver.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cache := xdscache.New()
	g := xdsserver.NewGRPC(ctx, cache, xdsserver.NewTracker(cache, slog.New(slog.NewTextHandler(io.Discard, nil))))
	done := make(chan struct{})
	go func() { xdsserver.Serve(ctx, g, lis); close(done) }()
	defer func() { cancel(); <-done }()

	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	frames := make(chan http2.Frame, 16)
	go func() {
		defer close(frames)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				continue // the server's settings; the reader goroutine does not write
			}
			frames <- f
		}
	}()
	// next is the next PING ack or GOAWAY, within 5 s.
	next := func() http2.Frame {
		t.Helper()
		timeout := time.After(5 * time.Second)
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					return nil
				}
				switch f := f.(type) {
				case *http2.PingFrame:
					if f.IsAck() {
						return f
					}
				case *http2.GoAwayFrame:
					return f
				}
			case <-timeout:
				t.Fatal("no PING ack or GOAWAY within 5 s")
			}
		}
	}
	// gRPC answers the PING that strikes out and sends its GOAWAY after the answer: five PINGs, so that a
	// GOAWAY after the fourth (three strikes) is read before the fifth's answer.
	for i := range 5 {
		if i > 0 {
			time.Sleep(2200 * time.Millisecond) // the pace under test: just above the 2 s lbplane allows
		}
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if f := next(); f == nil {
			t.Fatalf("PING %d, 2.2 s after the previous answer: the connection closed", i+1)
		} else if p, ok := f.(*http2.PingFrame); !ok || p.Data[0] != byte(i) {
			t.Fatalf("PING %d, 2.2 s after the previous answer: got %v, want its ack", i+1, f)
		}
	}
	for i := range 4 {
		if err := fr.WritePing(false, [8]byte{byte(10 + i)}); err != nil {
			break // the server closed the connection
		}
	}
	for {
		f := next()
		if f == nil {
			t.Fatal("the connection closed without a GOAWAY after PINGs back to back")
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM (too_many_pings)", ga.ErrCode)
			}
			return
		}
	}
}
