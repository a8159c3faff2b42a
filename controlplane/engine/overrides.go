package engine

import "github.com/lbplane/lbplane/controlplane/translate"

// SetOverrides makes o the operator's endpoint overrides in force (drain, maintenance) and publishes: only
// the policies whose overrides changed are translated again, and only their endpoints are sent. o is kept as
// it is: the caller hands over a new map for every change and never modifies one it handed over.
func (e *Engine) SetOverrides(o translate.Overrides) *translate.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.overrides = o
	e.rev++
	return e.run()
}

// Overrides returns the endpoint overrides in force; the map must not be modified.
func (e *Engine) Overrides() translate.Overrides {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.overrides
}

// PlanOverrides translates what the policies would become with o as the overrides, publishing nothing (as
// Plan does for a push).
func (e *Engine) PlanOverrides(o translate.Overrides) *translate.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	all, _, _ := e.mergeSources(e.sources)
	e.loadFiles(all)
	refs := e.refs()
	refs.Overrides = o
	return e.translator.Translate(all, refs)
}
