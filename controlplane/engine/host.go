package engine

import (
	"net/netip"
	"slices"

	"github.com/lbplane/lbplane/controlplane/reach"
)

// hostRules are the parts of the backend address rules that lbplane learns while it runs: the addresses
// of the Envoys' hosts and the ports lbplane and the Envoys serve on them.
type hostRules struct {
	self  []netip.Addr
	ports []reach.OwnPort
}

// rules are the server's rules (Reach) with what is known of the hosts. Caller holds e.mu.
func (e *Engine) rules() reach.Rules {
	r := e.Reach
	if len(e.host.self) > 0 {
		r.Self = append(slices.Clip(r.Self), e.host.self...)
	}
	if len(e.host.ports) > 0 {
		r.OwnPorts = append(slices.Clip(r.OwnPorts), e.host.ports...)
	}
	return r
}

// Rules returns the backend address rules translation applies now.
func (e *Engine) Rules() reach.Rules {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rules()
}

// SetHost sets the addresses of the Envoys' own hosts and the ports lbplane and the Envoys serve there,
// and translates again when they changed: a backend there is refused (reach.Rules.Self and OwnPorts).
// self is sorted and without duplicates; ports are in a stable order.
func (e *Engine) SetHost(self []netip.Addr, ports []reach.OwnPort) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if slices.Equal(self, e.host.self) && slices.Equal(ports, e.host.ports) {
		return
	}
	e.host = hostRules{self: slices.Clone(self), ports: slices.Clone(ports)}
	e.rev++
	e.run()
}
