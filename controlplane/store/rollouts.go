package store

import bolt "go.etcd.io/bbolt"

// rolloutsBucket holds the staged rollouts in progress, or ended and still reported, one per proxy group
// (package rollout owns the value's format): a restart resumes them, so Envoys are never split between
// two generations without a record of it.
var rolloutsBucket = []byte("rollouts")

// Rollouts returns every stored rollout by proxy group.
func (s *Bolt) Rollouts() (map[string][]byte, error) { return s.listBucket(rolloutsBucket) }

// PutRollout stores a group's rollout, durably; nil deletes it.
func (s *Bolt) PutRollout(group string, v []byte) error { return s.putBucket(rolloutsBucket, group, v) }

// listBucket returns every record of bucket by key (none when the bucket was never written).
func (s *Bolt) listBucket(bucket []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
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

// putBucket stores key's record in bucket, durably (bbolt syncs before Update returns); nil deletes it.
func (s *Bolt) putBucket(bucket []byte, key string, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		if v == nil {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), v)
	})
}
