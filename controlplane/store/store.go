// Package store keeps accepted policies in standalone mode: in an embedded bbolt file (Bolt, the default,
// for one lbplane) or in etcd (Etcd, shared by several replicas). Both hold the same records and
// revocations behind one interface, Store.
//
// Bolt uses bbolt: pure Go (no cgo, so the binary stays static), a single file, and transactions that are
// fsynced on commit, so an acknowledged push survives a crash. Policies are keyed by namespace/name and kept
// as the exact bytes that were pushed, so a restart returns them byte for byte. SQLite would add cgo or a
// large pure-Go port for queries we never make.
package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

var bucket = []byte("policies")

// Record is one stored policy.
type Record struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Document is the policy as pushed (JSON), byte for byte.
	Document []byte `json:"document"`
	// Generation increases by one each time the spec changes.
	Generation int64 `json:"generation"`
	// Created is when the policy was first accepted; it decides who wins a conflict.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	UID     string    `json:"uid"`
	// decoded is Document's policy, once decoded (Policy).
	decoded decodedPolicy
}

// Key is the policy's key; its string form ("namespace/name") keys the record in the store.
func (r *Record) Key() objkey.Key {
	return objkey.Key{Namespace: r.Namespace, Name: r.Name}
}

// byStoredKey orders records as the store keeps them (CompareKeys).
func byStoredKey(out []*Record) {
	slices.SortFunc(out, func(a, b *Record) int { return CompareKeys(a.Key(), b.Key()) })
}

// CompareKeys is the order the store lists records in: their keys' string form ("namespace/name"),
// compared without building the strings.
func CompareKeys(a, b objkey.Key) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		// One namespace is a prefix of the other: "ns/" sorts against the longer one's next byte.
		switch {
		case strings.HasPrefix(b.Namespace, a.Namespace):
			c = cmp.Compare(byte('/'), b.Namespace[len(a.Namespace)])
		case strings.HasPrefix(a.Namespace, b.Namespace):
			c = cmp.Compare(a.Namespace[len(b.Namespace)], byte('/'))
		}
		if c == 0 { // a namespace with a slash in it: never valid, but ordered all the same
			return strings.Compare(a.String(), b.String())
		}
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Store is where standalone lbplane keeps the policies it accepted and the Envoy identities it revoked.
type Store interface {
	// List returns every record, sorted by key, and the revision of the store they were read at: the
	// revision a later Apply names as its base.
	List() ([]*Record, int64, error)
	// Apply writes puts and deletes in one transaction, all of them or none, only if the store is still at
	// revision base (ErrConflict otherwise: another writer changed it since); it returns the new revision.
	Apply(base int64, puts []*Record, deletes []objkey.Key) (int64, error)
	// Revocations returns the revocations stored (expired ones included; the caller prunes).
	Revocations() ([]apiwire.Revocation, error)
	// PutRevocations stores the revocations in force, durably.
	PutRevocations([]apiwire.Revocation) error
	Close() error
}

// ErrConflict is Apply's answer when the store changed since the revision the write was planned on.
var ErrConflict = errors.New("the store changed since this write was planned (another replica wrote it)")

// ErrTooLarge is Apply's answer when one write is more than the store takes in one transaction.
var ErrTooLarge = errors.New("the write is larger than the store takes in one transaction")

// ErrUnavailable wraps the errors of a store that cannot be reached: the replica serves what it has and
// takes no writes.
var ErrUnavailable = errors.New("the store is unreachable")

// Bolt is an open bbolt policy database: one process holds it, so it is its only writer and its
// revision is always 0.
type Bolt struct {
	// Metrics, when set, counts the store's operations.
	Metrics *metrics.Metrics
	db      *bolt.DB
}

// File is the database file in the data directory. It holds every policy and what lbplane keeps of its own
// state, so it is one of the files policies may never name (fileroots.Roots.Protect).
const File = "policies.db"

// Open opens (creating if needed) the store in dir. Only one process may hold it.
func Open(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, File), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%s is in use by another lbplane", dir)
		}
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return &Bolt{db: db}, nil
}

// Close closes the database.
func (s *Bolt) Close() error { return s.db.Close() }

// List returns every record, sorted by key (Store.List); the revision is always 0.
func (s *Bolt) List() (out []*Record, rev int64, err error) {
	defer func() { s.Metrics.StoreOp("list", err) }()
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			r := &Record{}
			if err := json.Unmarshal(v, r); err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	byStoredKey(out)
	return out, 0, err
}

// Apply writes puts and deletes in one transaction: all of them or none. bbolt has one writer, this
// process, so base is always current.
func (s *Bolt) Apply(_ int64, puts []*Record, deletes []objkey.Key) (rev int64, err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	return 0, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, r := range puts {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(r.Key().String()), v); err != nil {
				return err
			}
		}
		for _, k := range deletes {
			if err := b.Delete([]byte(k.String())); err != nil {
				return err
			}
		}
		return nil
	})
}

// revocations is the bucket of the Envoy identities revoked before their certificates expire (lbctl
// revoke), kept under one key: a handful at a time, each forgotten once its certificates have expired.
var (
	revocationsBucket = []byte("revocations")
	revocationsKey    = []byte("all")
)

// Revocations returns the revocations stored (expired ones included; the caller prunes).
func (s *Bolt) Revocations() ([]apiwire.Revocation, error) {
	var out []apiwire.Revocation
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(revocationsBucket)
		if b == nil {
			return nil
		}
		v := b.Get(revocationsKey)
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &out)
	})
	return out, err
}

// PutRevocations replaces the stored revocations, durably (bbolt syncs before Update returns).
func (s *Bolt) PutRevocations(rs []apiwire.Revocation) error {
	v, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(revocationsBucket)
		if err != nil {
			return err
		}
		return b.Put(revocationsKey, v)
	})
}

// Equal reports whether two records hold the same policy with the same server-side metadata.
func (r *Record) Equal(o *Record) bool {
	return r == o || (r.Namespace == o.Namespace && r.Name == o.Name && bytes.Equal(r.Document, o.Document) &&
		r.Generation == o.Generation && r.Created.Equal(o.Created) && r.Updated.Equal(o.Updated) && r.UID == o.UID)
}
