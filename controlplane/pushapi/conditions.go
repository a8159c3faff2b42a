package pushapi

import (
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
)

// The conditions' transition times (policystatus.Transitions) live in the store as well, so that a restart
// keeps them: read back at start (Load), written after a status read that saw a condition change.

// conditionTimes is the store's side of the condition times; nil when it keeps none, or when policies come
// from Kubernetes, which keeps their times in the status it stores.
func (s *Server) conditionTimes() store.ConditionTimes {
	if s.ReadOnly != "" {
		return nil
	}
	c, _ := s.Store.(store.ConditionTimes)
	return c
}

// loadConditionTimes takes back the condition times the store holds. A record that does not decode is left
// out (its policy's conditions start again from now), and so is an unreadable store's: the times are what
// lbplane observed, not what anyone asked for.
func (s *Server) loadConditionTimes() {
	st := s.conditionTimes()
	if st == nil {
		return
	}
	recs, err := st.ConditionTimes()
	if err != nil {
		s.Log.Error("reading the condition times; conditions count from now", "error", err)
		return
	}
	for key, v := range recs {
		k, ok := objkey.Parse(key)
		if !ok {
			continue
		}
		if err := s.transitions.Restore(k, v); err != nil {
			s.Log.Error("a condition times record does not decode; it is left out", "policy", key, "error", err)
		}
	}
}

// storeConditionTimes writes the times that changed before the status read that saw them answers (one
// write, however many policies changed, as the store allows), so that what a client was shown survives a
// restart. One read writes at a time; the others leave the changes to it or to the next read, as they do
// after a write that failed.
func (s *Server) storeConditionTimes() {
	st := s.conditionTimes()
	if st == nil || !s.writingTimes.CompareAndSwap(false, true) {
		return
	}
	defer s.writingTimes.Store(false)
	changed := s.transitions.Changed()
	if changed == nil {
		return
	}
	recs := make(map[string][]byte, len(changed))
	for k, v := range changed {
		recs[k.String()] = v
	}
	if err := st.PutConditionTimes(recs); err != nil {
		s.Log.Warn("writing the condition times; tried again at the next status read", "policies", len(recs), "error", err)
		for k := range changed {
			s.transitions.Dirty(k)
		}
	}
}
