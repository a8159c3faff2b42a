package kubesource

import (
	"slices"

	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// proxyID names one stream: an Envoy that reconnects starts from nothing and must acknowledge again.
// connectedAt is in nanoseconds: a time.Time read back from another replica's report is not == to itself
// as this replica's tracker holds it (monotonic reading, location).
type proxyID struct {
	node, api   string
	connectedAt int64
}

func idOf(p *xdsserver.ProxyStatus) proxyID {
	return proxyID{node: p.NodeID, api: p.API, connectedAt: p.ConnectedAt.UnixNano()}
}

// runs is what the status writer knows of which proxies run one policy's translation result.
//
// A group has one version, and under continuous change (an EndpointSlice written every few milliseconds
// somewhere in the group) a proxy is almost never acknowledged-current with it: the tracker shows it Stale
// nearly all the time. Programmed asks something narrower: did the proxies acknowledge a config that
// carries this policy's current result? A proxy that was Synced once while the result was current runs it
// until the result changes (the translator hands out the same pointer until the policy or anything it
// references changes). A proxy that was behind when the result was first seen gets a mark: what it had
// been sent and had acknowledged of each type then. Once it has acknowledged, of every type that had
// something in flight at the mark, a response sent after the mark, it has everything the result put in
// the group's config, since responses of a type go out in order and each carries what the stream lacks of
// the config current when it is sent.
type runs struct {
	result *translate.PolicyResult
	ran    map[proxyID]bool
	marks  map[proxyID]mark
}

// mark is one proxy's progress when a result was first seen.
type mark struct {
	current string // the group's version the proxy was compared with
	types   map[string]typeMark
}

type typeMark struct {
	pending     bool
	sent, acked string
}

func markOf(p *xdsserver.ProxyStatus) mark {
	m := mark{current: p.Current, types: make(map[string]typeMark, len(p.Types))}
	for _, t := range p.Types {
		m.types[t.TypeURL] = typeMark{pending: t.Pending, sent: t.SentVersion, acked: t.AckedVersion}
	}
	return m
}

// passedBy tells whether p has, since the mark, acknowledged everything that was in flight then and
// something sent after it. Versions are the group's, content-derived: a type acknowledged at a version it
// was neither sent nor had acknowledged at the mark answered a later response (should a config recur, the
// proxy only looks behind for longer).
func (m mark) passedBy(p *xdsserver.ProxyStatus) bool {
	if len(p.Types) == 0 || p.Unresponsive {
		return false
	}
	moved := false
	for _, t := range p.Types {
		o, known := m.types[t.TypeURL]
		switch {
		case t.AckedVersion != "" && (!known || (t.AckedVersion != o.acked && (t.AckedVersion != o.sent || o.sent == m.current))):
			// A response sent after the mark, or the one in flight at the mark when that one already
			// carried the config the result was in.
			moved = true
		case known && !o.pending && o.sent == o.acked:
			// Nothing of this type was in flight at the mark: what the result changed of it was acknowledged.
		default:
			return false
		}
	}
	return moved
}

// view returns proxies as the policy whose result is pr sees them: a proxy of its group that runs pr is
// Synced even while it is Stale for a newer version of the group. It notes the proxies it finds running pr
// and marks the others; r starts again when pr is not the result it knew.
func (r *runs) view(proxies []xdsserver.ProxyStatus, pr *translate.PolicyResult) []xdsserver.ProxyStatus {
	if r.result != pr {
		*r = runs{result: pr}
	}
	var out []xdsserver.ProxyStatus
	live := 0
	for i := range proxies {
		p := &proxies[i]
		if p.Group != pr.ProxyGroup {
			continue
		}
		live++
		id := idOf(p)
		switch p.State {
		case xdsserver.Synced:
			r.note(id)
			continue
		case xdsserver.Stale:
		default:
			continue // a NACK: Compute tells whether it is this policy's
		}
		if !r.ran[id] {
			m, marked := r.marks[id]
			if !marked {
				if r.marks == nil {
					r.marks = map[proxyID]mark{}
				}
				r.marks[id] = markOf(p)
				continue
			}
			if !m.passedBy(p) {
				continue
			}
			r.note(id)
		}
		if out == nil {
			out = slices.Clone(proxies)
		}
		out[i].State = xdsserver.Synced
	}
	// Forget streams that are gone (a reconnect is a new stream).
	if len(r.ran)+len(r.marks) > live {
		r.prune(proxies)
	}
	if out == nil {
		return proxies
	}
	return out
}

func (r *runs) note(id proxyID) {
	if r.ran == nil {
		r.ran = map[proxyID]bool{}
	}
	r.ran[id] = true
	delete(r.marks, id)
}

func (r *runs) prune(proxies []xdsserver.ProxyStatus) {
	live := make(map[proxyID]bool, len(proxies))
	for i := range proxies {
		live[idOf(&proxies[i])] = true
	}
	for id := range r.ran {
		if !live[id] {
			delete(r.ran, id)
		}
	}
	for id := range r.marks {
		if !live[id] {
			delete(r.marks, id)
		}
	}
}

// covers tells whether every proxy of group runs the result or has a NACK: then the policy's view of them
// no longer depends on their sync states, only on which proxies there are and their NACKs.
func (r *runs) covers(proxies []xdsserver.ProxyStatus, group string) bool {
	for i := range proxies {
		p := &proxies[i]
		if p.Group == group && p.State != xdsserver.Nacked && !r.ran[idOf(p)] {
			return false
		}
	}
	return true
}
