package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// ParseEtcdURL reads etcd://host:port[,host:port...]/prefix/ (etcds:// for TLS) into endpoints and a
// prefix (DefaultEtcdPrefix when the path is empty).
func ParseEtcdURL(raw string) (endpoints []string, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	scheme := map[string]string{"etcd": "http", "etcds": "https"}[u.Scheme]
	if scheme == "" || u.Host == "" {
		return nil, "", fmt.Errorf("%q: want etcd://HOST:PORT[,HOST:PORT]/PREFIX/ (etcds:// for TLS)", raw)
	}
	for _, h := range strings.Split(u.Host, ",") {
		endpoints = append(endpoints, scheme+"://"+h)
	}
	prefix = u.Path
	if prefix == "" || prefix == "/" {
		prefix = DefaultEtcdPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return endpoints, prefix, nil
}

// Copy copies every record and the revocations from one store to another, which must hold no policy:
// documents byte for byte, with their generations, times and uids.
func Copy(from, to Store) (int, error) {
	recs, _, err := from.List()
	if err != nil {
		return 0, fmt.Errorf("reading the source: %w", err)
	}
	revs, err := from.Revocations()
	if err != nil {
		return 0, fmt.Errorf("reading the source's revocations: %w", err)
	}
	have, rev, err := to.List()
	if err != nil {
		return 0, fmt.Errorf("reading the target: %w", err)
	}
	if len(have) > 0 {
		return 0, fmt.Errorf("the target already holds %d policies: migrate into an empty store", len(have))
	}
	if _, err := to.Apply(rev, recs, nil); err != nil {
		return 0, fmt.Errorf("writing the target: %w", err)
	}
	if len(revs) > 0 {
		if err := to.PutRevocations(revs); err != nil {
			return 0, fmt.Errorf("writing the target's revocations: %w", err)
		}
	}
	if err := copyOverrides(from, to); err != nil {
		return 0, err
	}
	if err := copyConditionTimes(from, to); err != nil {
		return 0, err
	}
	return len(recs), nil
}

// SealSecrets stores sec sealed under key, unless etcd holds secrets already: then they must be the same.
func (s *Etcd) SealSecrets(key []byte, sec *Secrets) error {
	created, err := s.createSecrets(key, sec)
	if err != nil || created {
		return err
	}
	have, err := s.OpenSecrets(key)
	if err != nil {
		return err
	}
	if !bytes.Equal(have.CAKey, sec.CAKey) || have.Token != sec.Token || have.ReadOnlyToken != sec.ReadOnlyToken {
		return errors.New("etcd already holds another CA or other tokens under the prefix: migrate into an empty prefix")
	}
	return nil
}

// OpenSecrets returns the secrets stored, opened with key.
func (s *Etcd) OpenSecrets(key []byte) (*Secrets, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix+etcdSecrets, clientv3.WithCountOnly())
	if err != nil {
		return nil, s.unavailable(err)
	}
	if resp.Count == 0 {
		return nil, errors.New("etcd holds no CA and tokens under the prefix")
	}
	sec, _, err := s.LoadOrCreateSecrets(context.Background(), key, nil)
	return sec, err
}

// Authenticate gives lbplane's authentication to the records under the prefix that carry none (written by
// an lbplane that did not authenticate its records), for an operator who has checked that they are
// lbplane's: policy records (of the policy their key names), the revocations, the rollouts and the version
// key. Records that already verify are left as they are, and so are the election's and the replicas'
// Envoys (their replicas write them again) and anything else, which are listed in left. Each record is
// rewritten only if it has not changed since it was read; with dryRun nothing is written.
func (s *Etcd) Authenticate(dryRun bool) (sealed, left []string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*s.timeout)
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, s.unavailable(err)
	}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if s.verifyStored(key, kv.Value) == nil {
			continue
		}
		if !s.lbplaneShaped(key, kv.Value) {
			left = append(left, key)
			continue
		}
		sealed = append(sealed, key)
		if dryRun {
			continue
		}
		tr, err := s.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, s.auth.seal(key, kv.Value))).Commit()
		if err != nil {
			return sealed, left, s.unavailable(err)
		}
		if !tr.Succeeded {
			return sealed[:len(sealed)-1], left, fmt.Errorf("%s changed while it was being authenticated: stop every lbplane on the prefix and run this again", key)
		}
	}
	if !dryRun && len(sealed) > 0 {
		// A write of the version key: a replica that planned a push on what it read before plans it again.
		if _, err := s.Client.Put(ctx, s.prefix+etcdVersion, s.auth.seal(s.prefix+etcdVersion, nil)); err != nil {
			return sealed, left, s.unavailable(err)
		}
	}
	return sealed, left, nil
}

// lbplaneShaped says whether v, stored at key without authentication, is what an lbplane writes there.
func (s *Etcd) lbplaneShaped(key string, v []byte) bool {
	sub := strings.TrimPrefix(key, s.prefix)
	switch {
	case sub == etcdVersion:
		return true
	case sub == etcdRevocations:
		var rs []apiwire.Revocation
		return json.Unmarshal(v, &rs) == nil
	case strings.HasPrefix(sub, etcdRollouts), strings.HasPrefix(sub, etcdOverrides), strings.HasPrefix(sub, etcdConditions):
		return json.Valid(v)
	case strings.HasPrefix(sub, etcdPolicies):
		r := &Record{}
		return json.Unmarshal(v, r) == nil && s.prefix+etcdPolicies+r.Key().String() == key && len(r.Document) > 0
	}
	return false
}
