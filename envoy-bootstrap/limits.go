package envoybootstrap

import (
	"fmt"
	"syscall"
	"time"
)

// DefaultMaxHeapBytes is the overload manager's heap budget when none is given: 1 GiB.
const DefaultMaxHeapBytes int64 = 1 << 30

// DefaultScaledIdleTimeout is how long a connection that has sent nothing, or a stalled request, is kept once
// Envoy is at scaleFull of its connection limit or heap budget (overload manager reduce_timeouts).
const DefaultScaledIdleTimeout = 2 * time.Second

// The pressure (share of the connection limit or of the heap budget) at which the idle timeouts begin to
// shrink, and at which they reach DefaultScaledIdleTimeout (or --scaled-idle-timeout).
const (
	scaleFrom = 0.6
	scaleFull = 0.9
)

// heapReleasePerSecond is how much of the memory Envoy has freed tcmalloc gives back to the system each
// second, in the background, when there is a heap budget.
const heapReleasePerSecond = 16 << 20

// Shares of the heap budget where Envoy stops taking work that costs memory: new connections from
// shedAccept, and from shedDispatch it closes HTTP/1 connections as data arrives on them (HTTP/2 ones with
// a GOAWAY) instead of reading it.
const (
	shedAccept   = 0.9
	shedDispatch = 0.95
)

// fallbackMaxConnections applies when the open-file limit cannot be read or is unlimited.
const fallbackMaxConnections = 50000

// DefaultMaxConnections derives Envoy's global downstream connection limit from the open-file limit of the
// process rendering the bootstrap: 80 % of it, so that the rest stays for upstream connections, the admin
// and stats ports, xDS and files, and a connection flood never leaves Envoy without descriptors. It returns
// the limit and a note saying where it came from, for the bootstrap's comment.
//
// Go raises its own soft limit to the hard limit at start, so this reads the hard limit: run Envoy with
// `ulimit -n` raised to it as well (containers and systemd units usually have soft = hard), or pass
// --max-connections when Envoy runs elsewhere.
func DefaultMaxConnections() (int, string) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 || rl.Cur >= 1<<31 {
		return fallbackMaxConnections, fmt.Sprintf("open-file limit unknown, a fixed %d", fallbackMaxConnections)
	}
	n := int(rl.Cur) * 8 / 10
	if n < 1 {
		n = 1
	}
	return n, fmt.Sprintf("80 %% of the open-file limit %d where the bootstrap was rendered", rl.Cur)
}
