package translate

import (
	"unique"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// listenerShape is a plain listener's share of a policy (no TLS, no TCP route) without its virtual hosts:
// what the port's listener is copied from when the policy owns the port. Thousands of policies sharing a
// port have the same one, so a fragment holds a handle to it instead of its own ir.Listener (240 bytes and
// a name per policy).
type listenerShape struct {
	name, address        string
	port                 uint32
	protocol             ir.Protocol
	noRouterDynamicStats bool
	edge                 ir.Edge
}

// shapeOf returns l's shape, and false when l carries what a shape does not hold.
func shapeOf(l *ir.Listener) (unique.Handle[listenerShape], bool) {
	if l.TLS != nil || l.TCP != nil {
		return unique.Handle[listenerShape]{}, false
	}
	return unique.Make(listenerShape{name: l.Name, address: l.Address, port: l.Port, protocol: l.Protocol,
		noRouterDynamicStats: l.NoRouterDynamicStats, edge: l.Edge}), true
}

// listenerCopy returns a copy of the fragment's listener share, without its virtual hosts.
func (f *fragment) listenerCopy() ir.Listener {
	if f.listener != nil {
		c := *f.listener
		c.VirtualHosts = nil
		return c
	}
	s := f.shape.Value()
	return ir.Listener{Name: s.name, Address: s.address, Port: s.port, Protocol: s.protocol,
		NoRouterDynamicStats: s.noRouterDynamicStats, Edge: s.edge}
}

// listenerTLS is the TLS of the fragment's listener share; nil for a plain one.
func (f *fragment) listenerTLS() *ir.ListenerTLS {
	if f.listener == nil {
		return nil
	}
	return f.listener.TLS
}
