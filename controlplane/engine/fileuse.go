package engine

import (
	"maps"
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// fileUse indexes the files the held policies reference. RefreshFiles runs every two seconds whatever
// happens; listing the referenced files from every policy cost it O(policies) each time (5 ms per run at
// 10,000 Kubernetes policies that reference none). With the index it costs what the referenced files and
// the policies that reference them cost.
type fileUse struct {
	// of holds each policy held that references a file: its files, and in how many source lists it is.
	of map[*v1alpha1.LoadBalancerPolicy]*policyFiles
	// paths counts the policies of of that reference each path.
	paths map[string]int
	// looks counts the policies whose files were listed or checked, for tests.
	looks int64
	// names are the host names lbplane resolves, and who asks (see dns.go).
	names dnsNames
}

type policyFiles struct {
	files []string
	// dns are the host names lbplane resolves for the policy.
	dns  []translate.DNSUse
	held int
}

// add notes p as held once more.
func (u *fileUse) add(p *v1alpha1.LoadBalancerPolicy) {
	if pf := u.of[p]; pf != nil {
		pf.held++
		return
	}
	u.looks++
	files := translate.PolicyFiles(p)
	dns := policyDNS(p)
	if len(files)+len(dns) == 0 {
		return
	}
	if u.of == nil {
		u.of, u.paths = map[*v1alpha1.LoadBalancerPolicy]*policyFiles{}, map[string]int{}
	}
	u.of[p] = &policyFiles{files: files, dns: dns, held: 1}
	for _, path := range files {
		u.paths[path]++
	}
	for _, d := range dns {
		u.names.add(d)
	}
}

// policyDNS lists the host names lbplane resolves for p, looking at its endpoints first: only a policy
// with a host name is copied and defaulted.
func policyDNS(p *v1alpha1.LoadBalancerPolicy) []translate.DNSUse {
	if !slices.ContainsFunc(p.Spec.Backends, func(b v1alpha1.Backend) bool { return b.UsesDNS() }) {
		return nil
	}
	c := p.DeepCopy()
	v1alpha1.Default(c)
	return translate.DNSQueries(c)
}

// drop notes p as held once less.
func (u *fileUse) drop(p *v1alpha1.LoadBalancerPolicy) {
	pf := u.of[p]
	if pf == nil {
		return
	}
	if pf.held--; pf.held > 0 {
		return
	}
	delete(u.of, p)
	for _, path := range pf.files {
		if u.paths[path]--; u.paths[path] == 0 {
			delete(u.paths, path)
		}
	}
	for _, d := range pf.dns {
		u.names.drop(d)
	}
}

// sorted lists the referenced paths; a policy that references only host names has no path.
func (u *fileUse) sorted() []string {
	return slices.Sorted(maps.Keys(u.paths))
}

// hold makes source hold next (which the engine keeps as it is) and updates the file index: a policy at
// the same place in both lists is the same policy (policies are never modified), so only the places that
// differ are looked at. Caller holds e.mu.
func (e *Engine) hold(source string, next []*v1alpha1.LoadBalancerPolicy) {
	prev := e.sources[source]
	if len(prev) == len(next) {
		for i, p := range next {
			if prev[i] != p {
				e.fileUse.add(p)
				e.fileUse.drop(prev[i])
			}
		}
	} else {
		// Added first: a policy in both lists keeps its entry.
		for _, p := range next {
			e.fileUse.add(p)
		}
		for _, p := range prev {
			e.fileUse.drop(p)
		}
	}
	e.sources[source] = next
}

// FileLooks counts the policies whose file references the engine listed or checked so far, for tests: a
// refresh of the files looks at the policies that reference one, not at every policy.
func (e *Engine) FileLooks() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fileUse.looks
}
