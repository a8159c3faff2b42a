package engine

import (
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

// referencedNow lists the files the held policies reference.
func (e *Engine) referencedNow() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fileUse.sorted()
}
