package store

import (
	"fmt"
	"maps"
	"slices"
)

// Overrides keeps the operator's endpoint overrides (drain, maintenance: lbctl endpoint) beside the policies,
// one record per policy ("namespace/name"), whose value package pushapi owns: they outlive pushes of the
// policy and restarts, until lbctl endpoint ready removes them. Both stores implement it.
type Overrides interface {
	// EndpointOverrides returns every policy's record.
	EndpointOverrides() (map[string][]byte, error)
	// PutEndpointOverrides stores a policy's record durably; nil deletes it. The etcd store writes only over
	// what this replica last read or wrote (ErrConflict otherwise: read again and decide again).
	PutEndpointOverrides(policy string, v []byte) error
}

// overridesBucket holds the endpoint overrides, by policy.
var overridesBucket = []byte("endpoint-overrides")

// EndpointOverrides returns every policy's overrides record.
func (s *Bolt) EndpointOverrides() (out map[string][]byte, err error) {
	defer func() { s.Metrics.StoreOp("list", err) }()
	return s.listBucket(overridesBucket)
}

// PutEndpointOverrides stores a policy's overrides, durably (bbolt syncs before Update returns); nil deletes
// them.
func (s *Bolt) PutEndpointOverrides(policy string, v []byte) (err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	return s.putBucket(overridesBucket, policy, v)
}

// copyOverrides copies the endpoint overrides, when both stores keep them (both of lbplane's do).
func copyOverrides(from, to Store) error {
	f, ok1 := from.(Overrides)
	t, ok2 := to.(Overrides)
	if !ok1 || !ok2 {
		return nil
	}
	all, err := f.EndpointOverrides()
	if err != nil {
		return fmt.Errorf("reading the source's endpoint overrides: %w", err)
	}
	if len(all) > 0 {
		// The target's revisions, for its writes.
		if _, err := t.EndpointOverrides(); err != nil {
			return fmt.Errorf("reading the target's endpoint overrides: %w", err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if err := t.PutEndpointOverrides(k, all[k]); err != nil {
			return fmt.Errorf("writing the target's endpoint overrides of %s: %w", k, err)
		}
	}
	return nil
}
