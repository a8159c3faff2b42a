package translate

import (
	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// ChangedRefs names the Services and Secrets whose entry in Refs was added, modified or removed since the
// Refs of the translator's previous call. A source that maintains its maps (the Kubernetes source) knows
// them, and so spares the translator a look at every policy that references anything.
type ChangedRefs struct {
	Services []ServiceRef
	Secrets  []SecretRef
	// DNS names the host names whose answers changed (the engine's resolver knows them).
	DNS []DNSQuery
}

// TranslateChanged returns what Translate(policies, refs) returns. changed must name every Service and
// Secret whose entry differs from the previous call's Refs (naming more is harmless): only the policies
// that reference one of them are checked for a change of what they read, found through an index, instead
// of every policy that references anything. When anything else of refs changed (the files, the settings,
// a map that was nil and no longer is), it checks every policy, as Translate does.
func (t *Translator) TranslateChanged(policies []*v1alpha1.LoadBalancerPolicy, refs Refs, changed ChangedRefs) *Result {
	return t.translate(policies, refs, &changed)
}

// RefHashes counts the hashes of a policy's references made so far (each one reads every file, Service and
// Secret the policy references), for tests: a change of one Service costs one policy's, not every one's.
func (t *Translator) RefHashes() int64 { return t.refHashes.Load() }

// hintCovers tells whether the changed Services and Secrets a caller names are all that changed since the
// last call: only the Service, Secret and DNS maps may have been replaced.
func (t *Translator) hintCovers(id refsIdentity, hint *ChangedRefs) bool {
	a, b := id.refsKey, t.refs.refsKey
	// A caller that names no host name did not change the answers (the engine translates every change of
	// them as it takes it).
	sameDNS := (a.dns == b.dns && a.nDNS == b.nDNS) || len(hint.DNS) > 0
	return a.files == b.files && a.nFiles == b.nFiles && a.crossNamespace == b.crossNamespace && a.noStats == b.noStats && a.accessLog == b.accessLog &&
		a.servicesNil == b.servicesNil && a.secretsNil == b.secretsNil && sameDNS
}

// recheck marks the policy under k changed when what it references changed.
func (t *Translator) recheck(changed map[objkey.Key]*v1alpha1.LoadBalancerPolicy, k objkey.Key, refs Refs) {
	if _, ok := changed[k]; ok {
		return
	}
	if f := t.frags[k]; f != nil && t.hashRefs(f, refs) != f.refsHash {
		changed[k] = f.src
	}
}

func (t *Translator) hashRefs(f *fragment, refs Refs) [32]byte {
	t.refHashes.Add(1)
	return f.refsHashIn(refs)
}

// refUsers indexes the fragments by the Services and Secrets they reference.
type refUsers struct {
	services map[ServiceRef]map[objkey.Key]struct{}
	secrets  map[SecretRef]map[objkey.Key]struct{}
	dns      map[DNSQuery]map[objkey.Key]struct{}
}

func (u *refUsers) add(f *fragment) {
	if len(f.dns) > 0 && u.dns == nil {
		u.dns = map[DNSQuery]map[objkey.Key]struct{}{}
	}
	for _, q := range f.dns {
		set := u.dns[q]
		if set == nil {
			set = map[objkey.Key]struct{}{}
			u.dns[q] = set
		}
		set[f.key] = struct{}{}
	}
	if len(f.services) > 0 && u.services == nil {
		u.services = map[ServiceRef]map[objkey.Key]struct{}{}
	}
	for _, ref := range f.services {
		set := u.services[ref]
		if set == nil {
			set = map[objkey.Key]struct{}{}
			u.services[ref] = set
		}
		set[f.key] = struct{}{}
	}
	if len(f.secrets) > 0 && u.secrets == nil {
		u.secrets = map[SecretRef]map[objkey.Key]struct{}{}
	}
	for _, ref := range f.secrets {
		set := u.secrets[ref]
		if set == nil {
			set = map[objkey.Key]struct{}{}
			u.secrets[ref] = set
		}
		set[f.key] = struct{}{}
	}
}

func (u *refUsers) drop(f *fragment) {
	for _, q := range f.dns {
		if set := u.dns[q]; set != nil {
			delete(set, f.key)
			if len(set) == 0 {
				delete(u.dns, q)
			}
		}
	}
	for _, ref := range f.services {
		if set := u.services[ref]; set != nil {
			delete(set, f.key)
			if len(set) == 0 {
				delete(u.services, ref)
			}
		}
	}
	for _, ref := range f.secrets {
		if set := u.secrets[ref]; set != nil {
			delete(set, f.key)
			if len(set) == 0 {
				delete(u.secrets, ref)
			}
		}
	}
}

// TranslateUpdate returns what Translate(policies, refs) returns, where policies is the list of the
// previous call (prev) with changed set (added or modified) and deleted removed, and changed names the
// Services and Secrets whose entries differ from the previous call's Refs (see TranslateChanged). It
// looks at the policies it is told about, not at every policy of the list: the list is only kept, for
// the next call. When prev is not the list of the previous call, or anything but the Service and Secret
// maps of refs changed, it diffs the whole list as Translate does.
func (t *Translator) TranslateUpdate(prev, policies []*v1alpha1.LoadBalancerPolicy, changedPolicies []*v1alpha1.LoadBalancerPolicy,
	deleted []objkey.Key, refs Refs, changed ChangedRefs) *Result {
	id := identityOf(refs)
	if !sameList(prev, t.prev) || !(id.same(t.refs) || t.hintCovers(id, &changed)) {
		t.listLooks.Add(int64(len(policies)))
		return t.translate(policies, refs, &changed)
	}
	t.listLooks.Add(int64(len(changedPolicies) + len(deleted)))
	touched := make(map[objkey.Key]*v1alpha1.LoadBalancerPolicy, len(changedPolicies)+len(deleted)) // nil value: removed
	for _, k := range deleted {
		if t.frags[k] != nil {
			touched[k] = nil
		}
	}
	for _, p := range changedPolicies {
		k := objkey.Of(p)
		if f := t.frags[k]; f != nil && f.src == p {
			delete(touched, k)
			continue
		}
		touched[k] = p
	}
	if !id.same(t.refs) {
		for _, ref := range changed.Services {
			for k := range t.users.services[ref] {
				t.recheck(touched, k, refs)
			}
		}
		for _, ref := range changed.Secrets {
			for k := range t.users.secrets[ref] {
				t.recheck(touched, k, refs)
			}
		}
		for _, q := range changed.DNS {
			for k := range t.users.dns[q] {
				t.recheck(touched, k, refs)
			}
		}
	}
	for _, k := range overridesChanged(t.overrides, refs.Overrides) {
		t.recheck(touched, k, refs)
	}
	t.overrides = refs.Overrides
	t.refs, t.prev = id, policies
	t.apply(touched, refs)
	return t.last
}

// ListLooks counts the policies of the lists given to TranslateUpdate that it looked at, for tests: an
// update of one policy among many looks at one.
func (t *Translator) ListLooks() int64 { return t.listLooks.Load() }

// sameList tells whether a and b are the same list (the same elements of the same array), not only equal.
func sameList(a, b []*v1alpha1.LoadBalancerPolicy) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
