package store

import (
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The endpoint overrides live in etcd beside the policies, one key per policy, authenticated as every record
// lbplane writes: every replica serves the same overrides, and the one that did not write them hears of the
// change from the watch (OverrideChanges).
const etcdOverrides = "overrides/" // + namespace/name

// EndpointOverrides returns every policy's overrides record, and remembers each key's revision:
// PutEndpointOverrides writes only over what this replica last read or wrote.
func (s *Etcd) EndpointOverrides() (map[string][]byte, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix+etcdOverrides, clientv3.WithPrefix())
	if err != nil {
		return nil, s.unavailable(err)
	}
	out := map[string][]byte{}
	revs := map[string]int64{}
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), s.prefix+etcdOverrides)
		// A record lbplane did not write is refused (as if there were none); its revision is kept, so that
		// lbplane's next write replaces it.
		revs[k] = kv.ModRevision
		if v, err := s.openRecord(string(kv.Key), kv.ModRevision, kv.Value); err == nil {
			out[k] = v
		}
	}
	s.mu.Lock()
	s.overrideRevs = revs
	s.mu.Unlock()
	return out, nil
}

// PutEndpointOverrides stores a policy's overrides (nil deletes them) if nobody wrote them since this
// replica last read or wrote them (ErrConflict otherwise).
func (s *Etcd) PutEndpointOverrides(policy string, v []byte) (err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	if t := s.StaleSince(); !t.IsZero() {
		return ErrUnavailable
	}
	key := s.prefix + etcdOverrides + policy
	s.mu.Lock()
	known := s.overrideRevs[policy]
	s.mu.Unlock()
	op := clientv3.OpDelete(key)
	if v != nil {
		op = clientv3.OpPut(key, s.auth.seal(key, v))
	}
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", known)).Then(op).Commit()
	if err != nil {
		return s.unavailable(err)
	}
	if !resp.Succeeded {
		return ErrConflict
	}
	s.mu.Lock()
	if s.overrideRevs == nil {
		s.overrideRevs = map[string]int64{}
	}
	if v == nil {
		delete(s.overrideRevs, policy)
	} else {
		s.overrideRevs[policy] = resp.Header.Revision
	}
	s.mu.Unlock()
	return nil
}

// OverrideChanges receives a value after a policy's overrides changed (written by any replica, this one too).
func (s *Etcd) OverrideChanges() <-chan struct{} { return s.overrideChanges }
