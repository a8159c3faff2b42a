package store

import (
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ConditionTimes keeps when each policy's status conditions last changed status (lastTransitionTime), one
// record per policy ("namespace/name") whose value package policystatus owns: the standalone API computes
// status on every read, and the times must survive a restart, as Kubernetes keeps them in the status it
// stores. Both stores implement it.
type ConditionTimes interface {
	// ConditionTimes returns every policy's record.
	ConditionTimes() (map[string][]byte, error)
	// PutConditionTimes stores the records given, by policy, in as few writes as the store allows; a nil
	// value deletes the policy's record. Several replicas may write the same policy's times: the last
	// write wins (they are times the replicas observed, not an operator's decision).
	PutConditionTimes(map[string][]byte) error
}

// conditionsBucket holds the condition times, by policy.
var conditionsBucket = []byte("condition-times")

// ConditionTimes returns every policy's condition times.
func (s *Bolt) ConditionTimes() (out map[string][]byte, err error) {
	defer func() { s.Metrics.StoreOp("list", err) }()
	return s.listBucket(conditionsBucket)
}

// PutConditionTimes stores the records in one transaction, durably.
func (s *Bolt) PutConditionTimes(recs map[string][]byte) (err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(conditionsBucket)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(recs)) {
			if v := recs[k]; v == nil {
				err = b.Delete([]byte(k))
			} else {
				err = b.Put([]byte(k), v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// copyConditionTimes copies the condition times, when both stores keep them (both of lbplane's do).
func copyConditionTimes(from, to Store) error {
	f, ok1 := from.(ConditionTimes)
	t, ok2 := to.(ConditionTimes)
	if !ok1 || !ok2 {
		return nil
	}
	all, err := f.ConditionTimes()
	if err != nil {
		return fmt.Errorf("reading the source's condition times: %w", err)
	}
	if len(all) == 0 {
		return nil
	}
	if err := t.PutConditionTimes(all); err != nil {
		return fmt.Errorf("writing the target's condition times: %w", err)
	}
	return nil
}

// etcdConditions is where the condition times live in etcd, authenticated as every record lbplane writes.
const etcdConditions = "conditions/" // + namespace/name

// etcdOpsPerTxn keeps a write of many records under etcd's default limit of operations per transaction (128).
const etcdOpsPerTxn = 100

// ConditionTimes returns every policy's condition times.
func (s *Etcd) ConditionTimes() (map[string][]byte, error) {
	var revs map[string]int64
	return s.listKeyed(etcdConditions, &revs)
}

// PutConditionTimes stores the records, at most etcdOpsPerTxn per transaction.
func (s *Etcd) PutConditionTimes(recs map[string][]byte) (err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	if t := s.StaleSince(); !t.IsZero() {
		return ErrUnavailable
	}
	keys := slices.Sorted(maps.Keys(recs))
	for len(keys) > 0 {
		n := min(len(keys), etcdOpsPerTxn)
		ops := make([]clientv3.Op, 0, n)
		for _, k := range keys[:n] {
			key := s.prefix + etcdConditions + k
			if v := recs[k]; v == nil {
				ops = append(ops, clientv3.OpDelete(key))
			} else {
				ops = append(ops, clientv3.OpPut(key, s.auth.seal(key, v)))
			}
		}
		ctx, cancel := s.ctx()
		_, err := s.Client.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return s.unavailable(err)
		}
		keys = keys[n:]
	}
	return nil
}
