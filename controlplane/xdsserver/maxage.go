package xdsserver

import (
	"net"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// A stream past its maximum age (xdscache.Cache.MaxAge) is ended by closing its connection, once the cache
// has seen it answer everything it was sent: ending the stream alone would not do, as the client would
// open the next one on the same connection, to the same replica. With the connection closed, the client
// connects again, and a load balancer, DNS or a Kubernetes Service in front of the replicas may send it to
// another. Envoy and gRPC clients open one ADS stream per connection.

// connections are the xDS connections open, by remote address (as gRPC's peer reports it).
type connections struct {
	mu sync.Mutex
	by map[string]net.Conn
}

// Listener records the connections lis accepts, so that a stream past its maximum age can be ended (see
// xdscache.Cache.MaxAge). Use it on the xDS listener whenever a maximum age is set.
func (t *Tracker) Listener(lis net.Listener) net.Listener {
	return &trackedListener{Listener: lis, conns: &t.conns}
}

type trackedListener struct {
	net.Listener
	conns *connections
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, conns: l.conns, key: c.RemoteAddr().String()}
	l.conns.mu.Lock()
	if l.conns.by == nil {
		l.conns.by = map[string]net.Conn{}
	}
	l.conns.by[tc.key] = tc
	l.conns.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	conns *connections
	key   string
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.conns.mu.Lock()
		if c.conns.by[c.key] == c {
			delete(c.conns.by, c.key)
		}
		c.conns.mu.Unlock()
	})
	return c.Conn.Close()
}

func (cs *connections) get(key string) net.Conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.by[key]
}

// retire closes the connection of a stream the cache retired at its maximum age, and says whether the
// stream is ended (or had ended already).
func (t *Tracker) retire(id xdscache.StreamID) bool {
	key := streamKey{apiSotW, id.ID}
	if id.Delta {
		key.api = apiDelta
	}
	t.mu.Lock()
	s := t.streams[key]
	var peer, node, group string
	var age time.Duration
	if s != nil {
		peer, age = s.peer, time.Since(s.connectedAt)
		if s.node != nil {
			node, group = s.node.GetId(), xdscache.GroupOf(s.node)
		}
	}
	t.mu.Unlock()
	if s == nil {
		return true // it ended meanwhile
	}
	conn := t.conns.get(peer)
	if conn == nil {
		t.log.Warn("an xDS stream reached its maximum age on a connection the server does not track; it is left open",
			"node", node, "group", group, "api", key.api, "stream", id.ID)
		return false
	}
	t.log.Info("closing an xDS connection at its maximum age, every response answered; the client reconnects",
		"node", node, "group", group, "api", key.api, "stream", id.ID, "age", age.Round(time.Second))
	t.Metrics.ConnectionClosed(metrics.ClosedMaxAge)
	conn.Close()
	return true
}
