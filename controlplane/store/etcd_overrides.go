package store

// The endpoint overrides live in etcd beside the policies, one key per policy, authenticated as every record
// lbplane writes: every replica serves the same overrides, and the one that did not write them hears of the
// change from the watch (OverrideChanges).
const etcdOverrides = "overrides/" // + namespace/name

// EndpointOverrides returns every policy's overrides record, and remembers each key's revision:
// PutEndpointOverrides writes only over what this replica last read or wrote.
func (s *Etcd) EndpointOverrides() (map[string][]byte, error) {
	return s.listKeyed(etcdOverrides, &s.overrideRevs)
}

// PutEndpointOverrides stores a policy's overrides (nil deletes them) if nobody wrote them since this
// replica last read or wrote them (ErrConflict otherwise).
func (s *Etcd) PutEndpointOverrides(policy string, v []byte) (err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	return s.putKeyed(etcdOverrides, &s.overrideRevs, policy, v)
}

// OverrideChanges receives a value after a policy's overrides changed (written by any replica, this one too).
func (s *Etcd) OverrideChanges() <-chan struct{} { return s.overrideChanges }
