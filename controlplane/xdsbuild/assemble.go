package xdsbuild

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// An Assembly is one group's resources as built from its IR: the IR, the state built from it, and the
// marshalled virtual hosts of each HTTP port. It is the one assembler of xDS state: Assemble builds a group's
// next Assembly from its previous one, and a full build (Build) is the same walk from nothing. The
// translator hands out IR that shares every unchanged object with the previous IR, so comparing pointers of
// the two (both sorted) finds what changed without looking inside, and only that is built, marshalled and
// versioned again. An Assembly is never modified once returned.
type Assembly struct {
	ir     *ir.Group
	state  *xdscache.State
	routes map[uint32]*routeBuild
	// shapes is what each port's listener was built from (see listenerShape).
	shapes map[uint32]*listenerShape
	// scoped is the port served as scoped routes (ir.Group.ScopedPort), 0 for none; unscopable counts the
	// virtual hosts of each HTTP port that cannot be scopes (ir.VirtualHost.Scopable), kept up to date from
	// the hosts that changed, so that deciding ir.Listener.Scopable again does not visit every host.
	scoped     uint32
	unscopable map[uint32]int
}

// listenerShape is all a listener's build reads: the IR listener without its virtual hosts (they go to the
// route table, over RDS) and whether any route needs an HTTP filter (sessions, a rate limit): the
// connection manager lists a filter only when some route turns it on. A change of one virtual host hands out a
// new IR listener on its port; when its shape is the same, the built listener is too, and it is neither
// built nor marshalled again: with thousands of hosts on a port that was a pass over all of them.
type listenerShape struct {
	l       ir.Listener
	filters routeFilters
	scoped  bool
}

// routeFilters is which HTTP filters the routes of a virtual host (or of a port) turn on.
type routeFilters struct{ sessions, rateLimit bool }

func filtersOf(vh *ir.VirtualHost) routeFilters {
	var f routeFilters
	for _, r := range vh.Routes {
		f.sessions = f.sessions || r.Session != nil
		f.rateLimit = f.rateLimit || r.RateLimit != nil
	}
	return f
}

func shapeOf(l *ir.Listener, rb *routeBuild) *listenerShape {
	s := &listenerShape{l: *l}
	s.l.VirtualHosts = nil
	if rb != nil {
		s.filters = routeFilters{sessions: rb.sessions > 0, rateLimit: rb.rateLimits > 0}
	}
	return s
}

// build builds the listener from its shape: a virtual host that turns a filter on stands for all that do.
func (s *listenerShape) build(rb *routeBuild) proto.Message {
	l := s.l
	var have routeFilters
	for _, vh := range rb.vhosts {
		if have == s.filters {
			break
		}
		f := filtersOf(vh)
		if (f.sessions && !have.sessions) || (f.rateLimit && !have.rateLimit) {
			l.VirtualHosts = append(l.VirtualHosts, vh)
			have.sessions, have.rateLimit = have.sessions || f.sessions, have.rateLimit || f.rateLimit
		}
	}
	if s.scoped {
		return ScopedListener(&l)
	}
	return Listener(&l)
}

// routeBuild is an HTTP port's route table: its virtual hosts, each marshalled once, in the listener's order.
type routeBuild struct {
	vhosts []*ir.VirtualHost
	built  []*builtVHost
	// sum adds the hosts' short hashes; size their encoded sizes; sessions and rateLimits count the hosts
	// with a route that keeps sessions, or that is rate limited.
	sum        uint64
	size       int
	sessions   int
	rateLimits int
}

type builtVHost struct {
	bytes   []byte // the host's message is not kept: the table is joined from bytes
	short   uint64 // the first bytes of the hash of bytes
	filters routeFilters
}

func emptyAssembly() *Assembly {
	st, _ := xdscache.NewState(nil)
	return &Assembly{ir: &ir.Group{}, state: st, routes: map[uint32]*routeBuild{}, shapes: map[uint32]*listenerShape{}, unscopable: map[uint32]int{}}
}

// IR is the group the assembly was built from.
func (a *Assembly) IR() *ir.Group { return a.ir }

// State is the resources of the assembly, marshalled and versioned, ready to publish.
func (a *Assembly) State() *xdscache.State { return a.state }

// Assemble returns the group's next assembly: prev with what differs between prev's IR and g built again;
// a nil prev builds everything. Every resource built is validated with the protos' own rules and every
// destination checked against the group's clusters; on an error nothing is returned, and the caller keeps
// prev.
func Assemble(prev *Assembly, g *ir.Group) (*Assembly, error) {
	if prev == nil {
		prev = emptyAssembly()
	}
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
		change.Put[typ] = append(change.Put[typ], r)
		return r
	}
	remove := func(typ, name string) { change.Remove[typ] = append(change.Remove[typ], name) }

	walk(prev.ir.Secrets, g.Secrets, func(s *ir.Secret) string { return s.Name },
		func(s *ir.Secret) { put(resource.SecretType, Secret(s)) },
		func(s *ir.Secret) { remove(resource.SecretType, s.Name) })
	walk(prev.ir.Clusters, g.Clusters, func(c *ir.Cluster) string { return c.Name },
		func(c *ir.Cluster) {
			cr := put(resource.ClusterType, Cluster(c))
			if c.DNS != nil {
				// Envoy resolves this cluster's endpoints; an assignment left from when it was not is dropped.
				remove(resource.EndpointType, c.Name)
				return
			}
			la := LoadAssignment(c)
			if v := la.ValidateAll(); v != nil {
				errs = append(errs, fmt.Errorf("endpoints %s: %w", c.Name, v))
			}
			er, err := xdscache.NewResource(resource.EndpointType, la)
			if err != nil || cr == nil {
				errs = append(errs, err)
				return
			}
			change.Put[resource.EndpointType] = append(change.Put[resource.EndpointType], er.WithVersionOf(cr))
		},
		func(c *ir.Cluster) { remove(resource.ClusterType, c.Name); remove(resource.EndpointType, c.Name) })

	next := &Assembly{ir: g, routes: maps.Clone(prev.routes), shapes: maps.Clone(prev.shapes), unscopable: map[uint32]int{}}
	if next.shapes == nil {
		next.shapes = map[uint32]*listenerShape{}
	}
	// Which port is served as scoped routes (ir.Group.ScopedPort), from counts of the hosts that cannot be.
	for _, l := range g.Listeners {
		if l.Protocol != ir.HTTP {
			continue
		}
		var was *ir.Listener
		if i, ok := slices.BinarySearchFunc(prev.ir.Listeners, l.Port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok && prev.ir.Listeners[i].Protocol == ir.HTTP {
			was = prev.ir.Listeners[i]
		}
		next.unscopable[l.Port] = unscopable(was, prev.unscopable[l.Port], l)
		if next.scoped == 0 && next.unscopable[l.Port] == 0 && len(l.VirtualHosts) > ir.ScopedRoutesAbove {
			next.scoped = l.Port
		}
	}
	built := map[uint32]bool{}
	putListener := func(l *ir.Listener) {
		built[l.Port] = true
		// A listener replaced on the same port drops the old names if they differ.
		var was *ir.Listener
		if i, ok := slices.BinarySearchFunc(prev.ir.Listeners, l.Port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok {
			was = prev.ir.Listeners[i]
			if old := prev.ir.Listeners[i]; old.Name != l.Name {
				remove(resource.ListenerType, old.Name)
				if old.Protocol == ir.HTTP {
					remove(resource.RouteType, old.RouteConfigName())
				}
			}
		}
		wasScoped := was != nil && prev.scoped == l.Port
		if wasScoped && (was.Name != l.Name || next.scoped != l.Port) {
			// Served as one table now, or under other names: the old per-host resources go.
			removeHosts(remove, was, prev.routes[l.Port].vhosts)
			wasScoped = false
		}
		if next.scoped == l.Port {
			if !wasScoped && was != nil && was.Protocol == ir.HTTP && was.Name == l.Name {
				remove(resource.RouteType, was.RouteConfigName())
			}
			var before *routeBuild
			if wasScoped {
				before = prev.routes[l.Port]
			}
			rb, err := hostRoutes(g, before, l, put, remove)
			if err != nil {
				errs = append(errs, err)
			}
			next.routes[l.Port] = rb
			shape := shapeOf(l, rb)
			shape.scoped = true
			next.shapes[l.Port] = shape
			if was := prev.shapes[l.Port]; was == nil || was.scoped != shape.scoped || was.filters != shape.filters || !reflect.DeepEqual(was.l, shape.l) {
				put(resource.ListenerType, shape.build(rb))
			}
			return
		}
		delete(next.routes, l.Port)
		before := prev.routes[l.Port]
		if prev.scoped == l.Port {
			before = nil // a per-host build is no start for one table
		}
		if l.Protocol != ir.HTTP {
			next.shapes[l.Port] = shapeOf(l, nil)
			put(resource.ListenerType, Listener(l))
			if l.TCP == nil {
				errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, ir.ErrNoDestinations))
			} else if err := checkDestinations(g, "listener "+l.Name, l.TCP.Clusters); err != nil {
				errs = append(errs, err)
			}
			return
		}
		rb, r, err := routeTable(g, before, l)
		if err != nil {
			errs = append(errs, err)
		}
		next.routes[l.Port] = rb
		change.Put[resource.RouteType] = append(change.Put[resource.RouteType], r)
		shape := shapeOf(l, rb)
		next.shapes[l.Port] = shape
		if was := prev.shapes[l.Port]; was == nil || was.scoped || was.filters != shape.filters || !reflect.DeepEqual(was.l, shape.l) {
			put(resource.ListenerType, shape.build(rb))
		}
	}
	walk(prev.ir.Listeners, g.Listeners, func(l *ir.Listener) string { return fmt.Sprintf("%05d", l.Port) },
		putListener,
		func(l *ir.Listener) {
			if i, ok := slices.BinarySearchFunc(g.Listeners, l.Port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok && g.Listeners[i].Name == l.Name {
				return // replaced on the same port, under the same names
			}
			remove(resource.ListenerType, l.Name)
			if prev.scoped == l.Port {
				removeHosts(remove, l, prev.routes[l.Port].vhosts)
			} else if l.Protocol == ir.HTTP {
				remove(resource.RouteType, l.RouteConfigName())
			}
			delete(next.routes, l.Port)
			delete(next.shapes, l.Port)
		})
	// A port that is served as scoped routes, or stops being, while its own listener did not change (another
	// port took or gave up the scopes) is built again the other way.
	for _, port := range []uint32{prev.scoped, next.scoped} {
		if port == 0 || prev.scoped == next.scoped || built[port] {
			continue
		}
		if i, ok := slices.BinarySearchFunc(g.Listeners, port, func(o *ir.Listener, p uint32) int { return cmp.Compare(o.Port, p) }); ok {
			putListener(g.Listeners[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// A name both removed and put (a virtual host replaced under the same name, a host name that moved to
	// another virtual host) is put: the state must not drop what it holds.
	for typ, names := range change.Remove {
		if len(change.Put[typ]) == 0 {
			continue
		}
		putNames := map[string]bool{}
		for _, r := range change.Put[typ] {
			putNames[r.Name()] = true
		}
		change.Remove[typ] = slices.DeleteFunc(names, func(n string) bool { return putNames[n] })
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
func routeTable(g *ir.Group, prev *routeBuild, l *ir.Listener) (*routeBuild, *xdscache.Resource, error) {
	var errs []error
	if prev == nil {
		prev = &routeBuild{}
	}
	rb := &routeBuild{vhosts: l.VirtualHosts, built: make([]*builtVHost, 0, len(l.VirtualHosts))}
	var gone, fresh []*builtVHost
	i := 0
	for _, vh := range l.VirtualHosts {
		for i < len(prev.vhosts) && prev.vhosts[i] != vh && ir.CompareVirtualHosts(prev.vhosts[i], vh) <= 0 {
			gone = append(gone, prev.built[i])
			i++
		}
		if i < len(prev.vhosts) && prev.vhosts[i] == vh {
			rb.built = append(rb.built, prev.built[i])
			i++
			continue
		}
		for _, r := range vh.Routes {
			errs = append(errs, checkRoute(g, r))
		}
		b, err := buildVHost(vh)
		if err != nil {
			errs = append(errs, fmt.Errorf("virtual host %s: %w", vh.Name, err))
		}
		fresh = append(fresh, b)
		rb.built = append(rb.built, b)
	}
	gone = append(gone, prev.built[i:]...)
	head := RouteConfig(&ir.Listener{Name: l.Name})
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(head)
	// The order of the hosts follows from the hosts themselves (see ir.CompareVirtualHosts), so a
	// sum of their hashes versions the table as well as a hash of the whole would, and a change costs an
	// add and a subtract instead of a pass over every host.
	rb.sum, rb.size, rb.sessions, rb.rateLimits = prev.sum, prev.size, prev.sessions, prev.rateLimits
	if prev.built == nil {
		rb.sum, rb.size, rb.sessions, rb.rateLimits = 0, 0, 0, 0
	}
	for _, v := range gone {
		rb.sum -= v.short
		rb.size -= protowire.SizeTag(2) + protowire.SizeBytes(len(v.bytes))
		rb.sessions -= boolInt(v.filters.sessions)
		rb.rateLimits -= boolInt(v.filters.rateLimit)
	}
	for _, v := range fresh {
		rb.sum += v.short
		rb.size += protowire.SizeTag(2) + protowire.SizeBytes(len(v.bytes))
		rb.sessions += boolInt(v.filters.sessions)
		rb.rateLimits += boolInt(v.filters.rateLimit)
	}
	h := sha256.New()
	h.Write(b)
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], rb.sum)
	h.Write(sum[:])
	version := hex.EncodeToString(h.Sum(nil)[:8])
	size := len(b) + rb.size
	// The parts are immutable; the table is joined from them when a stream first sends it.
	parts := rb.built
	join := func() []byte {
		out := make([]byte, 0, size)
		out = append(out, b...)
		for _, v := range parts {
			out = protowire.AppendTag(out, 2, protowire.BytesType)
			out = protowire.AppendBytes(out, v.bytes)
		}
		return out
	}
	return rb, xdscache.NewLazyResource(resource.RouteType, l.RouteConfigName(), version, size, join), errors.Join(errs...)
}

// hostRoutes builds what changed on a port served as scoped routes since prev (nil: everything): a route
// table and scopes for each new or changed virtual host, removals for those gone. The returned routeBuild
// holds the hosts and counts the listener's shape needs; no table is joined.
func hostRoutes(g *ir.Group, prev *routeBuild, l *ir.Listener, put func(string, proto.Message) *xdscache.Resource, remove func(string, string)) (*routeBuild, error) {
	var errs []error
	rb := &routeBuild{vhosts: l.VirtualHosts}
	var before []*ir.VirtualHost
	if prev != nil {
		before = prev.vhosts
		rb.sessions, rb.rateLimits = prev.sessions, prev.rateLimits
	}
	gone := func(vh *ir.VirtualHost) {
		removeHosts(remove, l, []*ir.VirtualHost{vh})
		f := filtersOf(vh)
		rb.sessions -= boolInt(f.sessions)
		rb.rateLimits -= boolInt(f.rateLimit)
	}
	i := 0
	for _, vh := range l.VirtualHosts {
		for i < len(before) && before[i] != vh && ir.CompareVirtualHosts(before[i], vh) <= 0 {
			gone(before[i])
			i++
		}
		if i < len(before) && before[i] == vh {
			i++
			continue
		}
		for _, r := range vh.Routes {
			errs = append(errs, checkRoute(g, r))
		}
		if !vh.ImpliedByScopes() {
			put(resource.RouteType, HostRouteConfig(l, vh))
		}
		for _, sc := range Scopes(l, vh) {
			put(resource.ScopedRouteType, sc)
		}
		f := filtersOf(vh)
		rb.sessions += boolInt(f.sessions)
		rb.rateLimits += boolInt(f.rateLimit)
	}
	for _, vh := range before[i:] {
		gone(vh)
	}
	return rb, errors.Join(errs...)
}

// unscopable counts the virtual hosts of l that cannot be scopes, from was (the port's previous listener, or
// nil) and its count: only the hosts that differ are looked at.
func unscopable(was *ir.Listener, count int, l *ir.Listener) int {
	if was == l {
		return count
	}
	if was == nil {
		n := 0
		for _, vh := range l.VirtualHosts {
			n += boolInt(!vh.Scopable())
		}
		return n
	}
	before := was.VirtualHosts
	i := 0
	for _, vh := range l.VirtualHosts {
		for i < len(before) && before[i] != vh && ir.CompareVirtualHosts(before[i], vh) <= 0 {
			count -= boolInt(!before[i].Scopable())
			i++
		}
		if i < len(before) && before[i] == vh {
			i++
			continue
		}
		count += boolInt(!vh.Scopable())
	}
	for _, vh := range before[i:] {
		count -= boolInt(!vh.Scopable())
	}
	return count
}

// removeHosts removes the route tables and scopes of virtual hosts of a port served as scoped routes.
func removeHosts(remove func(string, string), l *ir.Listener, vhosts []*ir.VirtualHost) {
	for _, vh := range vhosts {
		if vh.ImpliedByScopes() {
			continue // it had neither
		}
		remove(resource.RouteType, l.HostRouteConfigName(vh))
		for _, d := range vh.Domains {
			remove(resource.ScopedRouteType, l.ScopeName(d))
		}
	}
}

func buildVHost(vh *ir.VirtualHost) (*builtVHost, error) {
	msg := RouteConfig(&ir.Listener{VirtualHosts: []*ir.VirtualHost{vh}}).VirtualHosts[0]
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	sum := sha256.Sum256(b)
	return &builtVHost{bytes: b, short: binary.LittleEndian.Uint64(sum[:]), filters: filtersOf(vh)}, msg.ValidateAll()
}

// checkRoute checks a route's destinations, unless it answers by itself (a redirect, a direct response).
func checkRoute(g *ir.Group, r *ir.Route) error {
	if r.Redirect != nil || r.DirectResponse != nil {
		return nil
	}
	return checkDestinations(g, "route "+r.Name, r.Clusters)
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
