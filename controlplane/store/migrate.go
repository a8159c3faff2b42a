package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
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
