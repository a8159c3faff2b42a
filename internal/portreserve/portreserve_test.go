package portreserve

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

func TestAReservedPortIsTakenOnlyBySharers(t *testing.T) {
	port := Reserve(t)
	if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		l.Close()
		t.Fatalf("a listener without SO_REUSEPORT bound reserved port %d", port)
	}
	if l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", port)); err == nil {
		l.Close()
		t.Fatalf("a wildcard listener without SO_REUSEPORT bound reserved port %d", port)
	}
	// A reservation takes no connections: nothing listens yet.
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Fatal("a reservation accepted a connection")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialling a reserved port: %v, want connection refused", err)
	}
	for round := 0; round < 2; round++ {
		lis, err := Listen(port)
		if err != nil {
			t.Fatalf("round %d: listening on the reserved port: %v", round, err)
		}
		go func() {
			if c, err := lis.Accept(); err == nil {
				c.Write([]byte("x"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil || b[0] != 'x' {
			t.Fatalf("round %d: read %q, %v", round, b, err)
		}
		c.Close()
		lis.Close()
		// Closed, the port refuses again, as a stopped server's would, and is still ours.
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			t.Fatalf("round %d: a closed server's port accepted a connection", round)
		}
	}
}

// A port reserved on several loopback addresses is taken on each of them only by sharers, and a server of
// each address listens on it.
func TestAPortReservedOnSeveralAddresses(t *testing.T) {
	ips := []string{"127.0.0.2", "127.0.0.3"}
	port := ReserveOn(t, ips...)
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, fmt.Sprint(port))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			t.Fatalf("a listener without SO_REUSEPORT bound reserved %s", addr)
		}
		lis, err := ListenOn(ip, port)
		if err != nil {
			t.Fatalf("listening on the reserved %s: %v", addr, err)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dialling %s: %v", addr, err)
		}
		c.Close()
		lis.Close()
	}
}
