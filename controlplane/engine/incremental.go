package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// groupBuild is what one group was last published as: its IR, the state built from it, and the marshalled
// virtual hosts of each HTTP port. The translator hands out IR that shares every unchanged object with the
// previous IR, so comparing pointers of the two (both sorted) finds what changed without looking inside,
// and only that is built, marshalled and versioned again.
type groupBuild struct {
	ir     *ir.Group
	state  *xdscache.State
	routes map[uint32]*routeBuild
}

// routeBuild is an HTTP port's route table: its virtual hosts, each marshalled once, in the listener's order.
type routeBuild struct {
	vhosts []*ir.VirtualHost
	built  []*builtVHost
}

type builtVHost struct {
	msg   *routev3.VirtualHost
	bytes []byte
	sum   [32]byte
}

var emptyBuild = func() *groupBuild {
	st, _ := xdscache.NewState(nil)
	return &groupBuild{ir: &ir.Group{}, state: st, routes: map[uint32]*routeBuild{}}
}

// BuildStats counts what incremental builds did, for tests.
type BuildStats struct {
	// Resources counts the resources built and marshalled; VirtualHosts the virtual hosts.
	Resources, VirtualHosts int64
}

// rebuild returns the group's new build: prev with what differs between prev.ir and g built again.
func (e *Engine) rebuild(prev *groupBuild, g *ir.Group) (*groupBuild, error) {
	change := xdscache.Change{Put: map[string][]*xdscache.Resource{}, Remove: map[string][]string{}}
	var errs []error
	put := func(typ string, m proto.Message) *xdscache.Resource {
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", typ, xdsName(m), err))
			}
		}
		r, err := xdscache.NewResource(typ, m)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		e.stats.Resources++
		change.Put[typ] = append(change.Put[typ], r)
		return r
	}
	remove := func(typ, name string) { change.Remove[typ] = append(change.Remove[typ], name) }

	walk(prev.ir.Secrets, g.Secrets, func(s *ir.Secret) string { return s.Name },
		func(s *ir.Secret) { put(resource.SecretType, xdsbuild.Secret(s)) },
		func(s *ir.Secret) { remove(resource.SecretType, s.Name) })
	walk(prev.ir.Clusters, g.Clusters, func(c *ir.Cluster) string { return c.Name },
		func(c *ir.Cluster) {
			cr := put(resource.ClusterType, xdsbuild.Cluster(c))
			la := xdsbuild.LoadAssignment(c)
			if v := la.ValidateAll(); v != nil {
				errs = append(errs, fmt.Errorf("endpoints %s: %w", c.Name, v))
			}
			er, err := xdscache.NewResource(resource.EndpointType, la)
			if err != nil || cr == nil {
				errs = append(errs, err)
				return
			}
			e.stats.Resources++
			change.Put[resource.EndpointType] = append(change.Put[resource.EndpointType], er.WithVersionOf(cr))
		},
		func(c *ir.Cluster) { remove(resource.ClusterType, c.Name); remove(resource.EndpointType, c.Name) })

	next := &groupBuild{ir: g, routes: map[uint32]*routeBuild{}}
	for port, rb := range prev.routes {
		next.routes[port] = rb
	}
	walk(prev.ir.Listeners, g.Listeners, func(l *ir.Listener) string { return fmt.Sprintf("%05d", l.Port) },
		func(l *ir.Listener) {
			// A listener replaced on the same port drops the old names if they differ.
			if i, ok := slices.BinarySearchFunc(prev.ir.Listeners, l.Port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok {
				if old := prev.ir.Listeners[i]; old.Name != l.Name {
					remove(resource.ListenerType, old.Name)
					if old.Protocol == ir.HTTP {
						remove(resource.RouteType, old.RouteConfigName())
					}
				}
			}
			put(resource.ListenerType, xdsbuild.Listener(l))
			delete(next.routes, l.Port)
			if l.Protocol != ir.HTTP {
				if l.TCP == nil {
					errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, ir.ErrNoDestinations))
				} else if err := checkDestinations(g, "listener "+l.Name, l.TCP.Clusters); err != nil {
					errs = append(errs, err)
				}
				return
			}
			rb, r, err := e.routeTable(g, prev.routes[l.Port], l)
			if err != nil {
				errs = append(errs, err)
			}
			next.routes[l.Port] = rb
			change.Put[resource.RouteType] = append(change.Put[resource.RouteType], r)
		},
		func(l *ir.Listener) {
			if i, ok := slices.BinarySearchFunc(g.Listeners, l.Port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok && g.Listeners[i].Name == l.Name {
				return // replaced on the same port, under the same names
			}
			remove(resource.ListenerType, l.Name)
			if l.Protocol == ir.HTTP {
				remove(resource.RouteType, l.RouteConfigName())
			}
			delete(next.routes, l.Port)
		})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	st, err := prev.state.Derive(change)
	if err != nil {
		return nil, err
	}
	next.state = st
	return next, nil
}

// walk compares two slices sorted by key and calls put for what is new or changed in next (a different
// pointer: the translator never modifies what it handed out) and drop for what next no longer has.
func walk[T any](prev, next []*T, key func(*T) string, put, drop func(*T)) {
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case i < len(prev) && j < len(next) && prev[i] == next[j]:
			i++
			j++
		case j == len(next):
			drop(prev[i])
			i++
		case i == len(prev):
			put(next[j])
			j++
		default:
			switch c := cmp.Compare(key(prev[i]), key(next[j])); {
			case c == 0:
				put(next[j])
				i++
				j++
			case c < 0:
				drop(prev[i])
				i++
			default:
				put(next[j])
				j++
			}
		}
	}
}

// routeTable builds an HTTP port's route configuration, marshalling only the virtual hosts that are not in
// prev. The resource's bytes are the table's own fields followed by each virtual host's bytes: a repeated
// message field may be encoded as the concatenation of its elements, so a table of many hosts costs a copy,
// not a marshal, when one of them changes. Its version hashes the parts' hashes.
func (e *Engine) routeTable(g *ir.Group, prev *routeBuild, l *ir.Listener) (*routeBuild, *xdscache.Resource, error) {
	var errs []error
	if prev == nil {
		prev = &routeBuild{}
	}
	rb := &routeBuild{vhosts: l.VirtualHosts, built: make([]*builtVHost, 0, len(l.VirtualHosts))}
	i := 0
	for _, vh := range l.VirtualHosts {
		for i < len(prev.vhosts) && prev.vhosts[i] != vh && translate.CompareVirtualHosts(prev.vhosts[i], vh) < 0 {
			i++
		}
		if i < len(prev.vhosts) && prev.vhosts[i] == vh {
			rb.built = append(rb.built, prev.built[i])
			i++
			continue
		}
		for _, r := range vh.Routes {
			errs = append(errs, checkDestinations(g, "route "+r.Name, r.Clusters))
		}
		b := e.buildVHost(vh)
		if err := b.msg.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("virtual host %s: %w", vh.Name, err))
		}
		rb.built = append(rb.built, b)
	}
	head := xdsbuild.RouteConfig(&ir.Listener{Name: l.Name})
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(head)
	h := sha256.New()
	h.Write(b)
	msgs := make([]*routev3.VirtualHost, len(rb.built))
	size := len(b)
	for k, v := range rb.built {
		msgs[k] = v.msg
		h.Write(v.sum[:])
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(v.bytes))
	}
	out := make([]byte, 0, size)
	out = append(out, b...)
	for _, v := range rb.built {
		out = protowire.AppendTag(out, 2, protowire.BytesType)
		out = protowire.AppendBytes(out, v.bytes)
	}
	head.VirtualHosts = msgs
	version := hex.EncodeToString(h.Sum(nil)[:8])
	return rb, xdscache.NewMarshalledResource(resource.RouteType, l.RouteConfigName(), head, out, version), errors.Join(errs...)
}

func (e *Engine) buildVHost(vh *ir.VirtualHost) *builtVHost {
	msg := xdsbuild.RouteConfig(&ir.Listener{VirtualHosts: []*ir.VirtualHost{vh}}).VirtualHosts[0]
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	e.stats.VirtualHosts++
	return &builtVHost{msg: msg, bytes: b, sum: sha256.Sum256(b)}
}

// checkDestinations is ir.Validate's reference check for one destination set, built now: it points at
// clusters of the group (sorted by name). What was not built again was checked when it was.
func checkDestinations(g *ir.Group, where string, wcs []ir.WeightedCluster) error {
	if len(wcs) == 0 {
		return fmt.Errorf("%s: %w", where, ir.ErrNoDestinations)
	}
	var errs []error
	for _, wc := range wcs {
		if _, ok := slices.BinarySearchFunc(g.Clusters, wc.Name, func(c *ir.Cluster, n string) int { return cmp.Compare(c.Name, n) }); !ok {
			errs = append(errs, fmt.Errorf("%s -> %s: %w", where, wc.Name, ir.ErrUnknownCluster))
		}
	}
	return errors.Join(errs...)
}

func xdsName(m proto.Message) string { return cachev3.GetResourceName(m) }
