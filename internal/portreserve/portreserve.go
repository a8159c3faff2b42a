// Package portreserve hands tests loopback ports that no other process can take before the process meant to
// bind them does.
//
// Picking a free port by listening on :0, closing, and passing the number on leaves a gap in which any
// outgoing connection on the machine may get that port as its ephemeral source port. Instead, a reservation
// keeps a socket bound (not listening) to the port with SO_REUSEPORT for the whole test. The
// kernel then never hands the port out as an ephemeral one, and only sockets of the same user that also set
// SO_REUSEPORT can bind it: Envoy's listeners (reuse_port is on by default), Envoy's admin when its bootstrap
// asks for it, etcd with --socket-reuse-port, kube-apiserver with --permit-port-sharing, and Listen below.
// A bound socket that does not listen takes no connections, so a stopped server's port refuses them, as a
// dead server's port would, and the port can be bound again later without a race.
package portreserve

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// TB is the part of testing.TB a reservation uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// Reserve returns a port on 127.0.0.1 that stays reserved until the test ends.
func Reserve(t TB) int {
	t.Helper()
	return ReserveOn(t, "127.0.0.1")
}

// ReserveOn returns one port reserved on each of the loopback addresses ips until the test ends, for
// servers that share a port on several addresses (the backends of a DNS name, whose answer carries no
// port). Each address counts: a connection from 127.0.0.2 holds its source port on 127.0.0.2 only.
func ReserveOn(t TB, ips ...string) int {
	t.Helper()
	if len(ips) == 0 {
		t.Fatal("reserving a port: no address")
	}
	var addrs [][4]byte
	for _, ip := range ips {
		a := net.ParseIP(ip).To4()
		if a == nil || !a.IsLoopback() {
			t.Fatal(fmt.Sprintf("reserving a port on %q: not an IPv4 loopback address", ip))
		}
		addrs = append(addrs, [4]byte(a))
	}
	// The first address's port, taken by the kernel, may be held on another address: try again, a bounded
	// number of times.
	var last error
	for range 50 {
		port, closeFn, err := reserve(addrs[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		closers := []func(){closeFn}
		for _, a := range addrs[1:] {
			_, closeFn, err := reserve(a, port)
			if err != nil {
				last = err
				break
			}
			closers = append(closers, closeFn)
		}
		if len(closers) == len(addrs) {
			t.Cleanup(func() {
				for _, c := range closers {
					c()
				}
			})
			return port
		}
		for _, c := range closers {
			c()
		}
	}
	t.Fatal(fmt.Sprintf("no port free on every one of %v in 50 tries: %v", ips, last))
	return 0
}

// reserve binds a socket to addr:port (port 0: one the kernel picks) without listening on it.
func reserve(addr [4]byte, port int) (int, func(), error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("reserving a port: %w", err)
	}
	fail := func(err error) (int, func(), error) {
		unix.Close(fd)
		return 0, nil, fmt.Errorf("reserving a port: %w", err)
	}
	// SO_REUSEPORT alone: with SO_REUSEADDR too, any listener setting SO_REUSEADDR (Go's do) could take it.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr, Port: port}); err != nil {
		return fail(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail(err)
	}
	return sa.(*unix.SockaddrInet4).Port, func() { unix.Close(fd) }, nil
}

func setReuse(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
}

var lc = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = setReuse(int(fd)) }); err != nil {
		return err
	}
	return serr
}}

// Listen listens on a reserved port of 127.0.0.1 (or, with port 0, on a new one) with SO_REUSEPORT, so that
// it can share the port with its reservation.
func Listen(port int) (net.Listener, error) {
	return ListenOn("127.0.0.1", port)
}

// ListenOn is Listen on the loopback address ip (a port of ReserveOn).
func ListenOn(ip string, port int) (net.Listener, error) {
	return lc.Listen(context.Background(), "tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
}
