package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// kubeIndex is where each policy of one list of the Kubernetes source is.
type kubeIndex struct {
	list []*v1alpha1.LoadBalancerPolicy
	at   map[objkey.Key]int
}

// UpdateKubernetes applies a change of the Kubernetes source and publishes the result: changed are the
// policies added or modified, deleted the ones gone, and services and secrets everything the source's
// policies reference now; refs names every Service and Secret whose entry differs from the maps of the
// previous call (SetKubernetes or UpdateKubernetes), so that the translator checks only the policies that
// reference them (see translate.Translator.TranslateChanged). The engine keeps all of them as they are: the
// caller must not modify them afterwards (a source that maintains its maps copies them before writing
// again).
//
// Unlike SetKubernetes, a change costs what it touches, not the number of policies: the list is copied
// (pointers only, so that the list the translator holds stays as it was) and patched in place, and the
// translator sees every unchanged policy under its old pointer.
func (e *Engine) UpdateKubernetes(changed []*v1alpha1.LoadBalancerPolicy, deleted []objkey.Key,
	services map[translate.ServiceRef]translate.ServiceEndpoints, secrets map[translate.SecretRef]translate.TLSSecret,
	refs translate.ChangedRefs) *translate.Result {
	e.prefetch(changed)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.sources[SourceKubernetes]
	ix := e.kube
	if ix == nil || len(ix.list) != len(cur) || (len(cur) > 0 && &ix.list[0] != &cur[0]) {
		// The list was replaced by SetKubernetes: index it once.
		ix = &kubeIndex{at: make(map[objkey.Key]int, len(cur))}
		for i, p := range cur {
			ix.at[objkey.Of(p)] = i
		}
	}
	list := slices.Clone(cur)
	added := false
	for _, p := range changed {
		k := objkey.Of(p)
		e.fileUse.add(p)
		if i, ok := ix.at[k]; ok {
			e.fileUse.drop(list[i])
			list[i] = p
			continue
		}
		ix.at[k] = len(list)
		list = append(list, p)
		added = true
	}
	for _, k := range deleted {
		i, ok := ix.at[k]
		if !ok {
			continue
		}
		e.fileUse.drop(list[i])
		// The last policy takes the deleted one's place: no other policy moves.
		last := len(list) - 1
		if i != last {
			list[i] = list[last]
			ix.at[objkey.Of(list[i])] = i
		}
		list[last] = nil
		list = list[:last]
		delete(ix.at, k)
	}
	ix.list = list
	e.kube = ix
	e.sources[SourceKubernetes] = list
	e.services, e.secrets = services, secrets
	e.rev++
	// Names answered for the first time (prefetch) changed the answers too.
	refs.DNS = append(slices.Clip(refs.DNS), e.dns.added...)
	e.dns.added = nil
	start := time.Now()
	took := func() time.Duration { return time.Since(start) }
	if !added && len(deleted) == 0 && e.kubeAlone(cur) {
		// Edits in place of the only source's list: the merge is the list itself, no name moves between
		// sources, and the translator is told which policies changed; nothing here looks at the others.
		m := e.merged
		e.merged = &merged{sources: maps.Clone(e.sources), pos: m.pos, all: list, origin: m.origin, shadowed: m.shadowed, direct: m.direct}
		for _, p := range changed {
			for _, path := range translate.PolicyFiles(p) {
				if _, ok := e.files[path]; !ok {
					e.files[path] = e.read(path)
				}
			}
		}
		e.loaded = list
		res := e.translator.TranslateUpdate(cur, list, changed, deleted, e.refs(), refs)
		return e.publish(res, m.origin, m.shadowed, took)
	}
	// As run, but the translator is told what changed. Every translation reads e.refs(), so the
	// translator's previous maps are the ones refs is relative to.
	all, origin, shadowed := e.mergeSources(e.sources)
	e.loadFiles(all)
	res := e.translator.TranslateChanged(all, e.refs(), refs)
	return e.publish(res, origin, shadowed, took)
}

// kubeAlone tells whether the Kubernetes source's list cur is the whole merge of the last translation:
// no other source holds a policy. Caller holds e.mu.
func (e *Engine) kubeAlone(cur []*v1alpha1.LoadBalancerPolicy) bool {
	m := e.merged
	if m == nil || m.direct != SourceKubernetes || len(m.all) != len(cur) || (len(cur) > 0 && &m.all[0] != &cur[0]) ||
		len(m.sources) != len(e.sources) {
		return false
	}
	for src, list := range e.sources {
		if src != SourceKubernetes && len(list) > 0 {
			return false
		}
	}
	return true
}

// TranslatorListLooks counts the policies of its lists the translator looked at in Kubernetes updates
// (see translate.Translator.ListLooks), for tests: an edit of one policy among many looks at one.
func (e *Engine) TranslatorListLooks() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.translator.ListLooks()
}

// RefHashes counts the hashes of a policy's references the translator made so far (see
// translate.Translator.RefHashes), for tests: an endpoint change costs one policy's, not every one's.
func (e *Engine) RefHashes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.translator.RefHashes()
}
