package engine

import (
	"slices"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// readUnlocked reads the given paths without holding e.mu. A read may be slow (a network filesystem, a
// path that turns out not to be a regular file): holding the engine's lock through it once hung every push
// and GET behind one FIFO.
func (e *Engine) readUnlocked(paths []string) translate.Files {
	out := make(translate.Files, len(paths))
	for _, p := range paths {
		out[p] = e.read(p)
	}
	return out
}

// prefetch reads, outside the lock, the files of policies that were never read, and keeps them; loadFiles
// then finds them under the lock.
func (e *Engine) prefetch(policies []*v1alpha1.LoadBalancerPolicy) {
	var missing []string
	e.mu.Lock()
	for _, p := range translate.ReferencedFiles(e.notLoaded(policies)) {
		if _, ok := e.files[p]; !ok {
			missing = append(missing, p)
		}
	}
	e.mu.Unlock()
	if len(missing) == 0 {
		return
	}
	read := e.readUnlocked(missing)
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, f := range read {
		if _, ok := e.files[p]; !ok {
			e.files[p] = f
		}
	}
}

// referencedNow lists the files every current policy references. The walk over every policy runs without
// e.mu: RefreshFiles calls this every 2 s, and at 10,000 policies holding the lock for it delayed the
// pushes that came meanwhile by tens of milliseconds (bench/results/2026-11-23-vm-incremental 6.4).
// Policies are never changed in place, but the Kubernetes list is (kubernetes.go): the walk gets a
// copy of it, a copy of pointers only.
func (e *Engine) referencedNow() []string {
	e.mu.Lock()
	all := slices.Clone(e.current())
	e.mu.Unlock()
	return translate.ReferencedFiles(all)
}
