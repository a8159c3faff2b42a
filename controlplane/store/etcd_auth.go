package store

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Every record lbplane writes under its etcd prefix carries a MAC made with a key derived from
// --etcd-secret-key-file (the key that seals the CA and tokens), bound to the etcd key it is stored at:
// a record written by any other etcd client, or moved from another key, does not verify and is refused,
// never served, and reported (the log, lbplane_store_refused_records, lbctl status). Policies stay
// readable with etcdctl: the MAC is a first line in front of the record, not an encryption.
//
// HMAC-SHA256 rather than AES-GCM (as the secrets are sealed): records are written on every push and every
// change of a replica's Envoys, and a MAC has no nonce to wear out.

// recordMACPrefix starts every authenticated record; the MAC follows in unpadded base64url, then a newline
// and the record itself.
const recordMACPrefix = "lbplane-hmac-sha256:"

// recordAuthInfo names the derived key (HKDF info), so that the same key file never keys two uses alike.
const recordAuthInfo = "lbplane etcd record authentication v1"

// errNotLbplanes is what opening a record that lbplane did not write (or that was moved to another key)
// returns.
var errNotLbplanes = errors.New("not written by lbplane: it does not carry lbplane's authentication for this key")

// recordAuth authenticates records with a key derived from the secret key.
type recordAuth struct{ key []byte }

func newRecordAuth(secretKey []byte) (recordAuth, error) {
	if len(secretKey) != 32 {
		return recordAuth{}, errors.New("--etcd-secret-key-file: needed with etcd: every record lbplane writes there is authenticated with it (64 hex digits; openssl rand -hex 32)")
	}
	k, err := hkdf.Key(sha256.New, secretKey, nil, recordAuthInfo, 32)
	if err != nil {
		return recordAuth{}, err
	}
	return recordAuth{key: k}, nil
}

func (a recordAuth) mac(at string, v []byte) []byte {
	h := hmac.New(sha256.New, a.key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(at)))
	h.Write(n[:])
	h.Write([]byte(at))
	h.Write(v)
	return h.Sum(nil)
}

// seal is v as stored at etcd key at: its MAC, then v.
func (a recordAuth) seal(at string, v []byte) string {
	var b strings.Builder
	b.Grow(len(recordMACPrefix) + 44 + len(v))
	b.WriteString(recordMACPrefix)
	b.WriteString(base64.RawURLEncoding.EncodeToString(a.mac(at, v)))
	b.WriteByte('\n')
	b.Write(v)
	return b.String()
}

// open returns the record stored at etcd key at, or errNotLbplanes when it does not carry lbplane's MAC
// for that key.
func (a recordAuth) open(at string, stored []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(recordMACPrefix))
	if !ok {
		return nil, errNotLbplanes
	}
	enc, v, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return nil, errNotLbplanes
	}
	got := make([]byte, base64.RawURLEncoding.DecodedLen(len(enc)))
	if n, err := base64.RawURLEncoding.Decode(got, enc); err != nil || n != sha256.Size {
		return nil, errNotLbplanes
	}
	if !hmac.Equal(got, a.mac(at, v)) {
		return nil, errNotLbplanes
	}
	return v, nil
}

// RefusedRecord is a record under lbplane's etcd prefix that lbplane did not write: it is not served.
type RefusedRecord struct {
	Key string
	// ModRevision is the etcd revision it was written at; Since is when this replica first refused it.
	ModRevision int64
	Since       time.Time
	Reason      string
}

// refusals are the records this replica refused, by etcd key: each is logged once per revision and listed
// until lbplane overwrites it or it is deleted.
type refusals struct {
	log *slog.Logger
	mu  sync.Mutex
	by  map[string]RefusedRecord
}

// refuse records that the record at key (written at modRev) is not lbplane's.
func (r *refusals) refuse(key string, modRev int64, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.by[key]; ok && old.ModRevision == modRev {
		return
	}
	if r.by == nil {
		r.by = map[string]RefusedRecord{}
	}
	r.by[key] = RefusedRecord{Key: key, ModRevision: modRev, Since: time.Now(), Reason: why.Error()}
	r.log.Error("refused a record in etcd that lbplane did not write: it is not served (delete it with etcdctl del, or push the policy again)",
		"key", key, "modRevision", modRev, "reason", why.Error())
}

// forget drops key: lbplane wrote it, or it is gone.
func (r *refusals) forget(key string) {
	r.mu.Lock()
	delete(r.by, key)
	r.mu.Unlock()
}

// replace makes the refusals among the keys in (a predicate over etcd keys) exactly now: what a full read
// of those keys found. Entries that were refused before keep their first time.
func (r *refusals) replace(in func(string) bool, now map[string]RefusedRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.by {
		if in(k) {
			if _, still := now[k]; !still {
				delete(r.by, k)
			}
		}
	}
	for k, v := range now {
		if old, ok := r.by[k]; ok && old.ModRevision == v.ModRevision {
			continue
		}
		if r.by == nil {
			r.by = map[string]RefusedRecord{}
		}
		v.Since = time.Now()
		r.by[k] = v
		r.log.Error("refused a record in etcd that lbplane did not write: it is not served (delete it with etcdctl del, or push the policy again)",
			"key", k, "modRevision", v.ModRevision, "reason", v.Reason)
	}
}

func (r *refusals) list() []RefusedRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RefusedRecord, 0, len(r.by))
	for _, v := range r.by {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b RefusedRecord) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Refused lists the records under the prefix that lbplane did not write and so does not serve, by key.
func (s *Etcd) Refused() []RefusedRecord { return s.refused.list() }

// RefusedCount is how many records Refused lists.
func (s *Etcd) RefusedCount() int {
	s.refused.mu.Lock()
	defer s.refused.mu.Unlock()
	return len(s.refused.by)
}

// openRecord returns the record at key, reporting it (and returning errNotLbplanes) when lbplane did not
// write it; a record lbplane wrote takes an earlier refusal of the key back.
func (s *Etcd) openRecord(key string, modRev int64, stored []byte) ([]byte, error) {
	v, err := s.auth.open(key, stored)
	if err != nil {
		s.refused.refuse(key, modRev, err)
		return nil, err
	}
	s.refused.forget(key)
	return v, nil
}

// verifyStored says whether the value at key (under the prefix, outside policies/) is one lbplane wrote:
// the sealed secrets open with the secret key, and every other record carries lbplane's MAC. A key that is
// none of lbplane's is refused as well.
func (s *Etcd) verifyStored(key string, v []byte) error {
	sub := strings.TrimPrefix(key, s.prefix)
	switch {
	case sub == etcdSecrets:
		if _, err := open(s.secretKey, key, v); err != nil {
			return errors.New("the sealed CA and tokens do not open with --etcd-secret-key-file")
		}
		return nil
	case sub == etcdVersion, sub == etcdRevocations, strings.HasPrefix(sub, etcdRollouts), strings.HasPrefix(sub, etcdProxies),
		strings.HasPrefix(sub, etcdLeader+"/"), strings.HasPrefix(sub, etcdPolicies), strings.HasPrefix(sub, etcdOverrides),
		strings.HasPrefix(sub, etcdConditions):
		_, err := s.auth.open(key, v)
		return err
	default:
		return fmt.Errorf("no record lbplane writes is kept at %q", sub)
	}
}
