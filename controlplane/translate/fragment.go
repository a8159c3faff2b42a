package translate

import (
	"cmp"
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unique"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/lint"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// fragment is what one policy translates into on its own, before any other policy is looked at: its field
// errors, and, when valid, its status and its share of the IR as if it were alone in its group. It keeps no
// defaulted copy of the policy: what the conflict checks read of it is copied out (port, address, protocol,
// claims, edge), and the copy's other parts were a tenth of lbplane's heap at 100,000 policies. Conflicts between policies are decided afterwards (see portIndex), and the group's IR is
// assembled from the fragments of the policies that won. A fragment is immutable once built: the Result
// hands out its IR pointers, and the next translation reuses them as they are.
type fragment struct {
	src  *v1alpha1.LoadBalancerPolicy
	key  objkey.Key
	hash [32]byte // of the policy's content (see policyHash)
	// refsHash covers the content of every file, Service and Secret the policy read (see refsHash).
	refsHash [32]byte
	// What the policy references, and its TLS chains' defaults: most policies have none of these, and share
	// one empty value (noExtra) instead of 96 bytes of empty slice headers each, which took the fragment
	// from the 416-byte size class to the 320 one. A fragment's own extra is never modified once built.
	*fragmentExtra

	// Ordering, from the policy as given (see older): creation time, then namespace and name.
	created int64 // unix nanoseconds; math.MaxInt64 when not stored yet
	group   string
	// invalid is the result of a policy that failed validation, or that claims a port or host name the
	// tenancy rules do not let its namespace use; nil otherwise.
	invalid *PolicyResult

	// The claim the policy makes on its port, for the conflict checks.
	port int32
	// bind is the listener's address and protocol: a handle, not the two strings (32 bytes), since almost
	// every policy on a port has the same ones; it took the fragment to the 288-byte size class.
	bind   unique.Handle[bind]
	claims []string // "h\x00host" and "s\x00server name", in the order the checks look at them
	// edge is the listener hardening the policy asks for; a port's listener gets its owner's (see edgeConflict).
	// edgeSet tells whether the policy sets any of it (else it takes the owner's as they are). A handle,
	// not the 150-byte struct: almost every policy has the defaults, which are then held once.
	edge    unique.Handle[ir.Edge]
	edgeSet bool
	// algorithm is the first backend's, defaulted (see PolicyResult.Algorithm).
	algorithm algorithmCode

	// served is the result when the policy wins its port; nil until built.
	served *PolicyResult
	// contributes is false when a referenced file or Secret cannot be used: the policy is accepted but not
	// served, and adds nothing to the IR.
	contributes bool
	clusters    []*ir.Cluster // sorted by name
	secretsIR   []*ir.Secret  // sorted by name
	listener    *ir.Listener  // this policy's share: name, address, port, protocol, TLS settings, chains, TCP
	// shape stands for listener when it has neither TLS nor TCP (listener is then nil; see listenerCopy).
	shape unique.Handle[listenerShape]
	vhost *ir.VirtualHost
}

// bind is where a listener listens, and what it speaks.
type bind struct {
	address  string
	protocol v1alpha1.Protocol
}

func (f *fragment) address() string             { return f.bind.Value().address }
func (f *fragment) protocol() v1alpha1.Protocol { return f.bind.Value().protocol }

// fragmentExtra is the part of a fragment that most policies leave empty (see fragment.fragmentExtra).
type fragmentExtra struct {
	files    []string
	services []ServiceRef
	secrets  []SecretRef
	dns      []DNSQuery
	// defaultChain tells, per chain of listener.TLS, whether its certificate lists no hostnames (and so may
	// answer clients without SNI).
	defaultChain []bool
	// delegated tells, per claim, whether the tenancy rules delegate that name to the policy's namespace
	// (see portIndex.heldElsewhere); nil when none is.
	delegated []bool
}

// delegatedClaim tells whether claim i of the policy is delegated to its namespace.
func (f *fragment) delegatedClaim(i int) bool { return i < len(f.delegated) && f.delegated[i] }

// noExtra is the extra of every fragment without references or TLS chains. Never modified.
var noExtra = &fragmentExtra{}

// older orders policies for conflicts: the older wins; a policy not stored yet is the newest.
func older(a, b *fragment) int {
	return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
}

func createdOf(p *v1alpha1.LoadBalancerPolicy) int64 {
	if p.CreationTimestamp.IsZero() {
		return 1<<63 - 1
	}
	return p.CreationTimestamp.UnixNano()
}

// policyHash covers everything of a policy that translation reads.
func policyHash(p *v1alpha1.LoadBalancerPolicy) [32]byte {
	h := sha256.New()
	spec, err := json.Marshal(&p.Spec)
	if err != nil {
		// Never for a typed spec; a unique value keeps the policy from matching a cached fragment.
		spec = []byte(err.Error() + p.ResourceVersion)
	}
	h.Write(spec)
	writeString(h, p.Namespace)
	writeString(h, p.Name)
	writeInt(h, p.Generation)
	writeInt(h, createdOf(p))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func writeString(h hash.Hash, s string) {
	writeInt(h, int64(len(s)))
	h.Write([]byte(s))
}

func writeInt(h hash.Hash, v int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	h.Write(b[:])
}

// refsOf lists what a defaulted policy references outside itself.
func refsOf(p *v1alpha1.LoadBalancerPolicy) (files []string, services []ServiceRef, secrets []SecretRef, dns []DNSQuery) {
	files = PolicyFiles(p)
	for _, b := range p.Spec.Backends {
		if b.Service != nil {
			services = append(services, ServiceRefOf(p.Namespace, b.Service))
		}
	}
	return files, services, SecretRefs(p), dnsRefs(p)
}

// refsHash covers the content of what a fragment references, as refs holds it now.
func (f *fragment) refsHashIn(refs Refs) [32]byte {
	h := sha256.New()
	writeInt(h, int64(boolInt(refs.CrossNamespace)))
	writeInt(h, int64(boolInt(refs.Granted[f.key])))
	writeString(h, refs.Reach.Key())
	for _, path := range f.files {
		c, ok := refs.Files[path]
		writeString(h, path)
		writeInt(h, int64(boolInt(ok)))
		writeString(h, c.Err)
		writeInt(h, int64(len(c.Data)))
		h.Write(c.Data)
	}
	writeInt(h, int64(boolInt(refs.Services == nil)))
	for _, ref := range f.services {
		se, ok := refs.Services[ref]
		writeInt(h, int64(boolInt(ok)))
		writeString(h, se.Err)
		writeString(h, strings.Join(se.GrantedTo, ","))
		writeInt(h, int64(len(se.Endpoints)))
		for _, e := range se.Endpoints {
			writeString(h, e.Address)
			writeString(h, e.Zone)
			writeInt(h, int64(e.Port)<<2|int64(boolInt(e.Ready))<<1|int64(boolInt(e.Terminating)))
		}
	}
	for _, q := range f.dns {
		a, ok := refs.DNS[q]
		writeInt(h, int64(boolInt(ok)))
		writeString(h, a.Err)
		writeInt(h, int64(len(a.Addrs)))
		for _, addr := range a.Addrs {
			b := addr.As16()
			h.Write(b[:])
		}
	}
	writeOverrides(h, refs.Overrides[f.key])
	writeInt(h, int64(boolInt(refs.Secrets == nil)))
	for _, ref := range f.secrets {
		s, ok := refs.Secrets[ref]
		writeInt(h, int64(boolInt(ok)))
		writeString(h, s.Err)
		writeInt(h, int64(len(s.Cert)))
		h.Write(s.Cert)
		writeInt(h, int64(len(s.Key)))
		h.Write(s.Key)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// translateOne builds the fragment of one policy. It reads nothing but the policy and refs.
func translateOne(p *v1alpha1.LoadBalancerPolicy, hash [32]byte, refs Refs) *fragment {
	c, errs := Prepare(p, refs.Reach)
	f := &fragment{src: p, key: objkey.Of(p), hash: hash, created: createdOf(p), group: c.Spec.ProxyGroup, fragmentExtra: noExtra,
		algorithm: algorithmOf(c)}
	var chains []bool
	if t := c.Spec.Listener.TLS; t != nil {
		for _, cert := range t.Certificates {
			chains = append(chains, len(cert.Hostnames) == 0)
		}
	}
	if files, services, secrets, dns := refsOf(c); len(files)+len(services)+len(secrets)+len(dns)+len(chains) > 0 {
		f.fragmentExtra = &fragmentExtra{files: files, services: services, secrets: secrets, dns: dns, defaultChain: chains}
	}
	f.refsHash = f.refsHashIn(refs)
	if len(errs) > 0 {
		f.invalid = &PolicyResult{Key: f.key, Generation: p.Generation, ProxyGroup: c.Spec.ProxyGroup,
			AcceptedReason: ReasonInvalid, AcceptedMessage: errs.Error(), Errors: errs,
			ResolvedRefsReason: ReasonInvalid, ResolvedRefsMessage: "not checked: the policy is invalid", algorithm: f.algorithm}
		return f
	}
	l := &c.Spec.Listener
	f.port, f.bind = l.Port, unique.Make(bind{address: l.Address, protocol: l.Protocol})
	f.edge, f.edgeSet = unique.Make(listenerEdge(c)), setsEdge(c)
	hosts := l.Hostnames
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, h := range hosts {
		f.claims = append(f.claims, "h\x00"+h)
	}
	for _, n := range sniNames(c) {
		f.claims = append(f.claims, "s\x00"+n)
	}
	if refused := f.tenancy(refs.Tenancy); refused != "" {
		f.invalid = &PolicyResult{Key: f.key, Generation: p.Generation, ProxyGroup: c.Spec.ProxyGroup,
			AcceptedReason: ReasonNotAllowed, AcceptedMessage: refused,
			ResolvedRefsReason: ReasonNotAllowed, ResolvedRefsMessage: "not checked: the policy is not allowed", algorithm: f.algorithm}
		return f
	}

	r := &PolicyResult{Key: f.key, Generation: p.Generation, ProxyGroup: c.Spec.ProxyGroup,
		Accepted: true, AcceptedReason: ReasonAccepted, AcceptedMessage: "the policy is valid and has no conflicts", algorithm: f.algorithm}
	// The gRPC findings are kept beside the others; status shows them for groups with gRPC clients
	// (lint.ForClients). Most are the same text in many policies: one copy is kept.
	grpcFindings := lint.Strings(lint.GRPC(c))
	for i, w := range grpcFindings {
		grpcFindings[i] = unique.Make(w).Value()
	}
	r.Warnings = append(lint.Strings(lint.Check(c)), grpcFindings...)
	f.served = r
	secrets, ferrs := resolveFiles(c, refs)
	if len(ferrs) > 0 {
		r.ResolvedRefs, r.ResolvedRefsReason = false, ReasonInvalidRef
		r.ResolvedRefsMessage = strings.Join(ferrs, "; ") + " (the policy is not served until this is fixed)"
		return f
	}
	f.contributes = true
	alone := &ir.Config{Groups: map[string]*ir.Group{}}
	// NoRouterDynamicStats is the listener's, set when the port is assembled: it is not the policy's.
	own := refs
	own.NoRouterDynamicStats = false
	addPolicy(alone, c, r, secrets, own)
	g := alone.Groups[c.Spec.ProxyGroup]
	shareClusters(c, g, r, len(refs.Overrides[f.key]) > 0)
	slices.SortFunc(g.Clusters, func(a, b *ir.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	f.clusters, f.secretsIR = g.Clusters, g.Secrets
	f.listener = g.Listeners[0]
	if len(f.listener.VirtualHosts) > 0 {
		f.vhost = f.listener.VirtualHosts[0]
	}
	if s, ok := shapeOf(f.listener); ok {
		f.shape, f.listener = s, nil
	}
	return f
}

// conflicted is the result of a valid policy that lost its port or a name to an older one.
func (f *fragment) conflicted(reason, msg string) *PolicyResult {
	return &PolicyResult{Key: f.key, Generation: f.src.Generation, ProxyGroup: f.group,
		AcceptedReason: reason, AcceptedMessage: msg,
		ResolvedRefsReason: ReasonConflicted, ResolvedRefsMessage: "not checked: the policy conflicts with another", algorithm: f.algorithm}
}

// member is a valid policy's place on its port, and whether it won it.
type member struct {
	f        *fragment
	accepted bool
	reason   string
	msg      string
}

// portIndex holds the valid policies that claim one port of one group, oldest first, and for each hostname
// and server name the policies that claim it. A change on the port re-decides the policies it can affect
// only: the changed one and the newer ones sharing one of its names, transitively.
type portIndex struct {
	key       portKey
	members   []*member // sorted by older
	claimants map[string][]*member
	// under holds, per wildcard claim key ("h\x00*.example.com", "h\x00*"), the members with a narrower
	// claim it covers (see overlapping).
	under map[string]map[*member]struct{}
	// vhosts are the served policies' virtual hosts in the listener's order (see sortVirtualHosts).
	vhosts   []*ir.VirtualHost
	listener *ir.Listener // assembled; nil when no policy is served on the port
}

func (ix *portIndex) find(f *fragment) int {
	i, _ := slices.BinarySearchFunc(ix.members, f, func(m *member, f *fragment) int { return older(m.f, f) })
	return i
}

func (ix *portIndex) insert(m *member) {
	ix.members = slices.Insert(ix.members, ix.find(m.f), m)
	for _, c := range m.f.claims {
		list := ix.claimants[c]
		i, _ := slices.BinarySearchFunc(list, m.f, func(m *member, f *fragment) int { return older(m.f, f) })
		if i < len(list) && list[i] == m {
			continue // a policy naming a host twice claims it once
		}
		ix.claimants[c] = slices.Insert(list, i, m)
	}
	ix.addUnder(m)
}

func (ix *portIndex) remove(f *fragment) *member {
	i := ix.find(f)
	if i >= len(ix.members) || ix.members[i].f != f {
		return nil
	}
	m := ix.members[i]
	ix.members = slices.Delete(ix.members, i, i+1)
	ix.removeUnder(m)
	for _, c := range f.claims {
		list := ix.claimants[c]
		if j := slices.Index(list, m); j >= 0 {
			list = slices.Delete(list, j, j+1)
		}
		if len(list) == 0 {
			delete(ix.claimants, c)
		} else {
			ix.claimants[c] = list
		}
	}
	return m
}

// newer calls fn for the members newer than f whose decision f can change: those sharing a name with it,
// and those of other namespaces whose names overlap its own (see heldElsewhere). fn may see one twice.
func (ix *portIndex) newer(f *fragment, fn func(*member)) {
	for _, c := range f.claims {
		for _, other := range ix.claimants[c] {
			if older(other.f, f) > 0 {
				fn(other)
			}
		}
	}
	ix.overlapping(f, func(other *member, _ int) {
		if older(other.f, f) > 0 {
			fn(other)
		}
	})
}

// decide says whether m wins its port, and if not why (a reason and a message), given that every older
// member is decided already.
func (ix *portIndex) decide(m *member) (bool, string, string) {
	owner := ix.members[0]
	if owner == m {
		return true, "", ""
	}
	o, f := owner.f, m.f
	switch {
	case o.protocol() != f.protocol():
		return false, ReasonConflicted, fmt.Sprintf("spec.listener.port: port %d is already used by policy %s with protocol %s", f.port, o.key, o.protocol())
	case o.protocol() == v1alpha1.ProtocolTCP:
		return false, ReasonConflicted, fmt.Sprintf("spec.listener.port: port %d is already used by TCP policy %s; a TCP port cannot be shared", f.port, o.key)
	case o.address() != f.address():
		return false, ReasonConflicted, fmt.Sprintf("spec.listener.address: port %d is already bound on %s by policy %s", f.port, o.address(), o.key)
	case f.edgeSet && f.edge != o.edge:
		return false, ReasonConflicted, edgeConflictMessage + fmt.Sprintf(" on port %d than policy %s, which owns the listener", f.port, o.key)
	}
	if holder, i, theirs := ix.heldElsewhere(f); holder != nil {
		return false, ReasonHostnameConflict, heldMessage(f, holder.f, i, theirs)
	}
	for _, c := range f.claims {
		for _, other := range ix.claimants[c] {
			if older(other.f, f) >= 0 {
				break
			}
			if !other.accepted {
				continue
			}
			name := c[2:]
			if c[0] == 'h' {
				return false, ReasonConflicted, fmt.Sprintf("spec.listener.hostnames: hostname %q on port %d is already served by policy %s", name, f.port, other.f.key)
			}
			return false, ReasonConflicted, fmt.Sprintf("spec.listener.tls: a certificate for %q on port %d is already served by policy %s", name, f.port, other.f.key)
		}
	}
	return true, "", ""
}

// Translator translates policies incrementally: each call diffs its input with the previous one,
// translates only the policies that changed (or whose files, Services or Secrets changed), re-decides
// conflicts only on the ports they touch, and rebuilds only the listeners and groups they are part of.
// The Results it returns share every unchanged part with the previous ones; they are never modified.
//
// A Translator is not safe for concurrent use. Its output is the same as a fresh Translate of the same
// input: the cache changes the cost, never the result.
type Translator struct {
	frags  map[objkey.Key]*fragment
	ports  map[portKey]*portIndex
	groups map[string]*groupState
	last   *Result
	prev   []*v1alpha1.LoadBalancerPolicy
	refs   refsIdentity
	runs   atomic.Int64
	// users is the reverse index of what the fragments reference (see TranslateChanged).
	users refUsers
	// overrides are the endpoint overrides of the last call (see overridesChanged).
	overrides Overrides
	// refHashes counts the hashes of a fragment's references, for tests (see RefHashes).
	refHashes atomic.Int64
	// listLooks counts the policies TranslateUpdate looked at, for tests (see ListLooks).
	listLooks atomic.Int64
}

// groupState is the IR of one group as last handed out, and what it is made of.
type groupState struct {
	ir *ir.Group
	// shares are the policies' uses of each shared cluster (see shareClusters), in the order they were
	// added; the group holds the last one's copy, the newest translation.
	shares map[string][]share
	// served counts the policies adding to the group; the group is left out of the IR without any.
	served int
}

// refsIdentity tells whether refs may have changed since the last call without looking at their content.
// It holds the maps themselves, not only their addresses: a map it no longer held could be collected and
// a new one, with other content, allocated at the same address.
type refsIdentity struct {
	held *Refs
	refsKey
}

type refsKey struct {
	files, services, secrets uintptr
	dns                      uintptr
	nFiles, nServices        int
	nSecrets, nDNS           int
	crossNamespace, noStats  bool
	accessLog                ir.AccessLog
	servicesNil, secretsNil  bool
	reach                    string
	tenancy                  string
}

func identityOf(r Refs) refsIdentity {
	ptr := func(m any) uintptr {
		v := reflect.ValueOf(m)
		if v.IsNil() {
			return 0
		}
		return v.Pointer()
	}
	return refsIdentity{held: &r, refsKey: refsKey{files: ptr(r.Files), services: ptr(r.Services), secrets: ptr(r.Secrets),
		dns: ptr(r.DNS), nFiles: len(r.Files), nServices: len(r.Services), nSecrets: len(r.Secrets), nDNS: len(r.DNS),
		crossNamespace: r.CrossNamespace, noStats: r.NoRouterDynamicStats, accessLog: r.AccessLog,
		servicesNil: r.Services == nil, secretsNil: r.Secrets == nil, reach: r.Reach.Key(), tenancy: r.Tenancy.Key()}}
}

// NewTranslator returns a translator with nothing cached.
func NewTranslator() *Translator {
	return &Translator{frags: map[objkey.Key]*fragment{}, ports: map[portKey]*portIndex{}, groups: map[string]*groupState{}, users: refUsers{},
		last: &Result{IR: &ir.Config{Groups: map[string]*ir.Group{}}}, refs: refsIdentity{refsKey: refsKey{files: 1}}}
}

// Runs counts the policies translated so far (cache misses), for tests and metrics.
func (t *Translator) Runs() int64 { return t.runs.Load() }

// Translate returns what Translate(policies, refs) returns, reusing the work of earlier calls. policies are
// not modified, and must not be modified by the caller afterwards: an unchanged pointer is an unchanged
// policy.
func (t *Translator) Translate(policies []*v1alpha1.LoadBalancerPolicy, refs Refs) *Result {
	return t.translate(policies, refs, nil)
}

func (t *Translator) translate(policies []*v1alpha1.LoadBalancerPolicy, refs Refs, hint *ChangedRefs) *Result {
	changed := map[objkey.Key]*v1alpha1.LoadBalancerPolicy{} // nil value: removed
	id := identityOf(refs)
	if id.noStats != t.refs.noStats || id.accessLog != t.refs.accessLog || id.crossNamespace != t.refs.crossNamespace || id.reach != t.refs.reach ||
		id.tenancy != t.refs.tenancy {
		// Settings that touch every policy: start over.
		for k := range t.frags {
			changed[k] = nil
		}
		t.prev = nil
		t.dropAll()
		t.last = &Result{IR: &ir.Config{Groups: map[string]*ir.Group{}}}
	}
	aligned := len(policies) == len(t.prev)
	for i, p := range policies {
		if i < len(t.prev) && t.prev[i] == p {
			continue
		}
		k := objkey.Of(p)
		// Another policy under the same name at the same place (an edit) keeps the lists aligned: every
		// name of the previous list is still there.
		aligned = aligned && i < len(t.prev) && objkey.Of(t.prev[i]) == k
		if f := t.frags[k]; f != nil && f.src == p {
			continue
		}
		changed[k] = p
	}
	if !aligned {
		present := make(map[objkey.Key]struct{}, len(policies))
		for _, p := range policies {
			present[objkey.Of(p)] = struct{}{}
		}
		for k := range t.frags {
			if _, ok := present[k]; !ok {
				changed[k] = nil
			}
		}
	}
	switch {
	case id.same(t.refs):
	case hint != nil && t.hintCovers(id, hint):
		// The caller names the Services and Secrets that changed: check only the policies that read them.
		for _, ref := range hint.Services {
			for k := range t.users.services[ref] {
				t.recheck(changed, k, refs)
			}
		}
		for _, ref := range hint.Secrets {
			for k := range t.users.secrets[ref] {
				t.recheck(changed, k, refs)
			}
		}
		for _, q := range hint.DNS {
			for k := range t.users.dns[q] {
				t.recheck(changed, k, refs)
			}
		}
	default:
		// Some file, Service or Secret may have changed: check the policies that read any.
		for k, f := range t.frags {
			if _, ok := changed[k]; ok || len(f.files)+len(f.services)+len(f.secrets)+len(f.dns) == 0 {
				continue
			}
			if t.hashRefs(f, refs) != f.refsHash {
				changed[k] = f.src
			}
		}
	}
	// The policies whose overrides changed read something new, as those whose files did.
	for _, k := range overridesChanged(t.overrides, refs.Overrides) {
		t.recheck(changed, k, refs)
	}
	t.overrides = refs.Overrides
	// Kept as given, not copied: the caller does not modify it (see above), and a copy per call would cost
	// O(policies) for a change of one.
	t.refs, t.prev = id, policies
	t.apply(changed, refs)
	return t.last
}

func (t *Translator) dropAll() {
	t.frags = map[objkey.Key]*fragment{}
	t.ports = map[portKey]*portIndex{}
	t.groups = map[string]*groupState{}
	t.users = refUsers{}
}

// apply replaces the fragments of the changed policies and hands out a new Result.
func (t *Translator) apply(changed map[objkey.Key]*v1alpha1.LoadBalancerPolicy, refs Refs) {
	if len(changed) == 0 {
		return
	}
	res := &Result{IR: &ir.Config{Groups: maps.Clone(t.last.IR.Groups)}, Policies: t.last.Policies.clone(),
		serial: serials.Add(1), parent: t.last.serial}
	for k := range changed {
		res.changed = append(res.changed, k)
	}
	// Per touched port: the members whose decision may change, and the owner before this call.
	type touched struct {
		dirty map[*member]bool
		owner *fragment
	}
	ports := map[portKey]*touched{}
	touch := func(ix *portIndex) *touched {
		tp := ports[ix.key]
		if tp == nil {
			tp = &touched{dirty: map[*member]bool{}}
			if len(ix.members) > 0 {
				tp.owner = ix.members[0].f
			}
			ports[ix.key] = tp
		}
		return tp
	}
	markNewer := func(ix *portIndex, tp *touched, f *fragment) {
		ix.newer(f, func(other *member) { tp.dirty[other] = true })
	}
	// What each group and port gains and loses.
	type change struct{ add, drop []*fragment }
	byGroup := map[string]*change{}
	byPort := map[portKey]*change{}
	note := func(f *fragment, add bool) {
		if !f.contributes {
			return
		}
		pk := portKey{f.group, f.port}
		gc, pc := byGroup[f.group], byPort[pk]
		if gc == nil {
			gc = &change{}
			byGroup[f.group] = gc
		}
		if pc == nil {
			pc = &change{}
			byPort[pk] = pc
		}
		if add {
			gc.add, pc.add = append(gc.add, f), append(pc.add, f)
		} else {
			gc.drop, pc.drop = append(gc.drop, f), append(pc.drop, f)
		}
	}
	fresh := map[*member]bool{}
	for k, p := range changed {
		old := t.frags[k]
		var f *fragment
		if p != nil {
			h := policyHash(p)
			if old != nil && old.hash == h && t.hashRefs(old, refs) == old.refsHash {
				old.src = p // the same content under a new pointer: keep the fragment
				continue
			}
			t.runs.Add(1)
			t.refHashes.Add(1) // translateOne hashes the new fragment's references
			f = translateOne(p, h, refs)
		}
		if old != nil {
			if old.invalid == nil {
				ix := t.ports[portKey{old.group, old.port}]
				tp := touch(ix)
				if m := ix.remove(old); m != nil {
					delete(tp.dirty, m)
					if m.accepted {
						note(old, false)
					}
					markNewer(ix, tp, old)
				}
			}
			delete(t.frags, k)
			t.users.drop(old)
			res.Policies.remove(k)
		}
		if f == nil {
			continue
		}
		t.frags[k] = f
		t.users.add(f)
		if f.invalid != nil {
			res.Policies.set(f.invalid)
			continue
		}
		pk := portKey{f.group, f.port}
		ix := t.ports[pk]
		if ix == nil {
			ix = &portIndex{key: pk, claimants: map[string][]*member{}, under: map[string]map[*member]struct{}{}}
			t.ports[pk] = ix
		}
		tp := touch(ix)
		m := &member{f: f}
		ix.insert(m)
		fresh[m] = true
		tp.dirty[m] = true
		markNewer(ix, tp, f)
	}

	// Re-decide the touched members of each port, oldest first. A member whose decision flips may change
	// the decision of newer members sharing a name with it, so those join the queue.
	for pk, tp := range ports {
		ix := t.ports[pk]
		if len(ix.members) == 0 {
			continue
		}
		if o := ix.members[0].f; o != tp.owner && !sameClaimOnPort(o, tp.owner) {
			// The owner sets the port's protocol and address: every decision on the port depends on it.
			for _, m := range ix.members {
				tp.dirty[m] = true
			}
		}
		q := &memberQueue{}
		for m := range tp.dirty {
			heap.Push(q, m)
		}
		seen := map[*member]bool{}
		for q.Len() > 0 {
			m := heap.Pop(q).(*member)
			if seen[m] {
				continue
			}
			seen[m] = true
			before, beforeMsg := m.accepted, m.msg
			m.accepted, m.reason, m.msg = ix.decide(m)
			switch {
			case fresh[m]:
				if m.accepted {
					note(m.f, true)
				}
			case before == m.accepted && beforeMsg == m.msg:
				continue
			case before && !m.accepted:
				note(m.f, false)
			case !before && m.accepted:
				note(m.f, true)
			}
			if !fresh[m] {
				res.changed = append(res.changed, m.f.key) // a decision changed on the way
			}
			if m.accepted {
				res.Policies.set(m.f.served)
			} else {
				res.Policies.set(m.f.conflicted(m.reason, m.msg))
			}
			if before != m.accepted || fresh[m] {
				ix.newer(m.f, func(other *member) {
					if !seen[other] {
						heap.Push(q, other)
					}
				})
			}
		}
	}
	for pk, pc := range byPort {
		t.assemblePort(pk, pc.add, pc.drop, refs.NoRouterDynamicStats, refs.AccessLog)
	}
	for name, gc := range byGroup {
		t.assembleGroup(res.IR, name, gc.add, gc.drop)
	}
	res.logChanges(t.last)
	t.last = res
}

// sameClaimOnPort tells whether a new owner of a port decides every other member as the old one did: the
// same policy, with what decide reads from the owner unchanged. Then an edit of the owner (its backends,
// say) re-decides only the members that share a name with it, not every policy on a port shared by
// thousands.
func sameClaimOnPort(a, b *fragment) bool {
	return b != nil && a.key == b.key && a.bind == b.bind && a.edge == b.edge
}

// memberQueue is a min-heap of members, oldest first.
type memberQueue []*member

func (q memberQueue) Len() int           { return len(q) }
func (q memberQueue) Less(i, j int) bool { return older(q[i].f, q[j].f) < 0 }
func (q memberQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *memberQueue) Push(x any)        { *q = append(*q, x.(*member)) }
func (q *memberQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	*q = old[:len(old)-1]
	return m
}

// assemblePort rebuilds the listener of one port from its served fragments.
func (t *Translator) assemblePort(pk portKey, add, drop []*fragment, noStats bool, accessLog ir.AccessLog) {
	ix := t.ports[pk]
	if ix == nil {
		ix = &portIndex{key: pk, claimants: map[string][]*member{}, under: map[string]map[*member]struct{}{}}
		t.ports[pk] = ix
	}
	vhosts := slices.Clone(ix.vhosts)
	for _, f := range drop {
		if f.vhost == nil {
			continue
		}
		if i := slices.Index(vhosts, f.vhost); i >= 0 {
			vhosts = slices.Delete(vhosts, i, i+1)
		}
	}
	for _, f := range add {
		if f.vhost == nil {
			continue
		}
		i, _ := slices.BinarySearchFunc(vhosts, f.vhost, ir.CompareVirtualHosts)
		vhosts = slices.Insert(vhosts, i, f.vhost)
	}
	ix.vhosts = vhosts
	// The oldest served member names the listener; it is almost always the first member, so this stops
	// early. Only HTTPS policies carry TLS (validation), so only an HTTPS port looks at every member.
	var first *fragment
	tlsUsed := false
	for _, m := range ix.members {
		if m.accepted && m.f.contributes {
			if first == nil {
				first = m.f
			}
			tlsUsed = tlsUsed || m.f.listenerTLS() != nil
			if first.protocol() != v1alpha1.ProtocolHTTPS {
				break
			}
		}
	}
	if first == nil {
		ix.listener = nil
		if len(ix.members) == 0 {
			delete(t.ports, pk)
		}
		return
	}
	// A copy of the oldest served policy's listener, so that every listener setting translation makes per
	// port (listenerFor) carries over; what several policies share is set below.
	c := first.listenerCopy()
	l := &c
	l.NoRouterDynamicStats, l.TLS, l.VirtualHosts = noStats, nil, nil
	l.AccessLog = accessLogOf(l.Edge, accessLog)
	if l.Protocol == ir.HTTP {
		l.VirtualHosts = vhosts
	}
	if tlsUsed {
		// Chains go in policy order, and the settings are the oldest served policy's (as in addChains).
		for _, m := range ix.members {
			f := m.f
			if !m.accepted || !f.contributes || f.listenerTLS() == nil {
				continue
			}
			if l.TLS == nil {
				ft := f.listener.TLS
				l.TLS = &ir.ListenerTLS{Default: -1, MinVersion: ft.MinVersion, MaxVersion: ft.MaxVersion, Ciphers: ft.Ciphers}
			}
			for i, ch := range f.listener.TLS.Chains {
				l.TLS.Chains = append(l.TLS.Chains, ch)
				if (i < len(f.defaultChain) && f.defaultChain[i]) || len(l.TLS.Chains) == 1 {
					l.TLS.Default = len(l.TLS.Chains) - 1
				}
			}
		}
	}
	ix.listener = l
}

// assembleGroup hands out a new IR group with the changed fragments' clusters, secrets and listeners.
func (t *Translator) assembleGroup(c *ir.Config, name string, add, drop []*fragment) {
	gs := t.groups[name]
	if gs == nil {
		gs = &groupState{ir: &ir.Group{Name: name}}
		t.groups[name] = gs
	}
	g := &ir.Group{Name: name, Clusters: slices.Clone(gs.ir.Clusters), Secrets: slices.Clone(gs.ir.Secrets), Shared: gs.ir.Shared}
	cloned := false
	// shared records the policies that now use the shared cluster name, in a copy of the last group's map.
	shared := func(name string) {
		if !cloned {
			g.Shared, cloned = maps.Clone(g.Shared), true
			if g.Shared == nil {
				g.Shared = map[string][]ir.Source{}
			}
		}
		if s := gs.shares[name]; len(s) > 0 {
			g.Shared[name] = sources(s)
		} else {
			delete(g.Shared, name)
			delete(gs.shares, name)
		}
	}
	ports := map[uint32]bool{}
	for _, f := range drop {
		gs.served--
		ports[uint32(f.port)] = true
		for _, cl := range f.clusters {
			i, ok := slices.BinarySearchFunc(g.Clusters, cl.Name, compareClusterName)
			if !ok {
				continue
			}
			if cl.IsShared() {
				s := slices.DeleteFunc(gs.shares[cl.Name], func(s share) bool { return s.cluster == cl })
				gs.shares[cl.Name] = s
				shared(cl.Name)
				if len(s) > 0 {
					g.Clusters[i] = s[len(s)-1].cluster
					continue
				}
			}
			g.Clusters = slices.Delete(g.Clusters, i, i+1)
		}
		for _, s := range f.secretsIR {
			if i, ok := slices.BinarySearchFunc(g.Secrets, s.Name, func(c *ir.Secret, n string) int { return cmp.Compare(c.Name, n) }); ok {
				g.Secrets = slices.Delete(g.Secrets, i, i+1)
			}
		}
	}
	for _, f := range add {
		gs.served++
		ports[uint32(f.port)] = true
		for _, cl := range f.clusters {
			i, found := slices.BinarySearchFunc(g.Clusters, cl.Name, compareClusterName)
			switch {
			case !cl.IsShared():
				g.Clusters = slices.Insert(g.Clusters, i, cl)
				continue
			case found:
				g.Clusters[i] = cl
			default:
				g.Clusters = slices.Insert(g.Clusters, i, cl)
			}
			if gs.shares == nil {
				gs.shares = map[string][]share{}
			}
			gs.shares[cl.Name] = append(gs.shares[cl.Name], share{cluster: cl, source: ir.Source{Namespace: f.key.Namespace, Name: f.key.Name, Backend: cl.Source.Backend}})
			shared(cl.Name)
		}
		for _, s := range f.secretsIR {
			i, _ := slices.BinarySearchFunc(g.Secrets, s.Name, func(c *ir.Secret, n string) int { return cmp.Compare(c.Name, n) })
			g.Secrets = slices.Insert(g.Secrets, i, s)
		}
	}
	for _, l := range gs.ir.Listeners {
		if !ports[l.Port] {
			g.Listeners = append(g.Listeners, l)
		}
	}
	for port := range ports {
		if ix := t.ports[portKey{name, int32(port)}]; ix != nil && ix.listener != nil {
			g.Listeners = append(g.Listeners, ix.listener)
		}
	}
	slices.SortFunc(g.Listeners, func(a, b *ir.Listener) int { return cmp.Compare(a.Port, b.Port) })
	if len(g.Clusters) == 0 {
		g.Clusters = nil
	}
	if len(g.Secrets) == 0 {
		g.Secrets = nil
	}
	if len(g.Shared) == 0 {
		g.Shared = nil
	}
	gs.ir = g
	if gs.served == 0 {
		delete(t.groups, name)
		delete(c.Groups, name)
		return
	}
	c.Groups[name] = g
}

// Translate turns policies into the IR. Older policies (by creation time, then namespace/name) win conflicts,
// so accepting a new policy never takes a port or hostname away from a live one. refs holds the content of
// the files, Services and Secrets the policies reference (see ReferencedFiles). Callers that translate again
// and again keep a Translator instead, which redoes only what changed.
func Translate(policies []*v1alpha1.LoadBalancerPolicy, refs Refs) *Result {
	return NewTranslator().Translate(policies, refs)
}

// same compares everything but the maps held (which are compared by address).
func (a refsIdentity) same(b refsIdentity) bool { return a.refsKey == b.refsKey }
