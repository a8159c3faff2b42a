package store

import bolt "go.etcd.io/bbolt"

// rolloutsBucket holds the staged rollouts in progress, or ended and still reported, one per proxy group
// (package rollout owns the value's format): a restart resumes them, so Envoys are never split between
// two generations without a record of it.
var rolloutsBucket = []byte("rollouts")

// Rollouts returns every stored rollout by proxy group.
func (s *Bolt) Rollouts() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(rolloutsBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return out, err
}

// PutRollout stores a group's rollout, durably; nil deletes it.
func (s *Bolt) PutRollout(group string, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(rolloutsBucket)
		if err != nil {
			return err
		}
		if v == nil {
			return b.Delete([]byte(group))
		}
		return b.Put([]byte(group), v)
	})
}
