package store

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The staged rollouts live in etcd beside the policies, one key per proxy group (package rollout owns the
// value's format), so that every replica serves each Envoy the side its rollout says and a leader that
// dies mid-rollout leaves a record the next one resumes. Each replica also publishes the Envoys it serves
// under a lease of its own: the leader places canaries and reads stats across the whole fleet, not only
// its own Envoys.
const (
	etcdRollouts = "rollouts/" // + group
	etcdProxies  = "proxies/"  // + replica id, under the replica's lease
	// proxiesTTL is how long a dead replica's Envoys keep counting (its lease's life).
	proxiesTTL = 10
)

// Rollouts returns every stored rollout by proxy group, and remembers each key's revision: PutRollout
// writes only over what this replica last read or wrote.
func (s *Etcd) Rollouts() (map[string][]byte, error) {
	return s.listKeyed(etcdRollouts, &s.rolloutRevs)
}

// PutRollout stores a group's rollout (nil deletes it) if nobody wrote it since this replica last read or
// wrote it (ErrConflict otherwise: read it again with Rollouts and decide again).
func (s *Etcd) PutRollout(group string, v []byte) error {
	return s.putKeyed(etcdRollouts, &s.rolloutRevs, group, v)
}

// listKeyed returns the records under the key prefix under (one per name: a group, a policy), and
// remembers each key's revision in *revs: putKeyed writes only over what this replica last read or wrote.
func (s *Etcd) listKeyed(under string, revs *map[string]int64) (map[string][]byte, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix+under, clientv3.WithPrefix())
	if err != nil {
		return nil, s.unavailable(err)
	}
	out := map[string][]byte{}
	seen := map[string]int64{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.prefix+under)
		// A record lbplane did not write is refused (as if there were none); its revision is kept, so that
		// lbplane's next write replaces it.
		seen[name] = kv.ModRevision
		if v, err := s.openRecord(string(kv.Key), kv.ModRevision, kv.Value); err == nil {
			out[name] = v
		}
	}
	s.mu.Lock()
	*revs = seen
	s.mu.Unlock()
	return out, nil
}

// putKeyed stores name's record under the key prefix under (nil deletes it) if nobody wrote it since this
// replica last read or wrote it (ErrConflict otherwise).
func (s *Etcd) putKeyed(under string, revs *map[string]int64, name string, v []byte) error {
	if t := s.StaleSince(); !t.IsZero() {
		return ErrUnavailable
	}
	key := s.prefix + under + name
	s.mu.Lock()
	known := (*revs)[name]
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
	if *revs == nil {
		*revs = map[string]int64{}
	}
	if v == nil {
		delete(*revs, name)
	} else {
		(*revs)[name] = resp.Header.Revision
	}
	s.mu.Unlock()
	return nil
}

// RolloutChanges receives a value after a stored rollout changed (written by any replica, this one too).
func (s *Etcd) RolloutChanges() <-chan struct{} { return s.rolloutChanges }

// PublishProxies writes what proxies returns (this replica's Envoys) under id every interval, under a lease
// that lapses proxiesTTL seconds after the replica stops, until ctx ends.
func (s *Etcd) PublishProxies(ctx context.Context, id string, interval time.Duration, proxies func() []byte) {
	key := s.prefix + etcdProxies + id
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(s.Client, concurrency.WithTTL(proxiesTTL), concurrency.WithContext(ctx))
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		t := time.NewTicker(interval)
		var last []byte // what this session wrote last: the lease keeps it, so an unchanged report is not written again
	loop:
		for {
			if v := proxies(); last == nil || string(v) != string(last) {
				wctx, cancel := s.ctx()
				_, err := s.Client.Put(wctx, key, s.auth.seal(key, v), clientv3.WithLease(sess.Lease()))
				cancel()
				switch {
				case err == nil:
					last = v
				case ctx.Err() == nil:
					s.log.Warn("publishing this replica's Envoys in etcd", "error", err)
				}
			}
			select {
			case <-ctx.Done():
				break loop
			case <-sess.Done():
				break loop
			case <-t.C:
			}
		}
		t.Stop()
		// A clean stop takes the replica's Envoys out at once.
		rctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		if ctx.Err() != nil {
			s.Client.Delete(rctx, key)
		}
		cancel()
		sess.Close()
	}
}

// Proxies returns what every replica published (PublishProxies), by replica id.
func (s *Etcd) Proxies() (map[string][]byte, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix+etcdProxies, clientv3.WithPrefix())
	if err != nil {
		return nil, s.unavailable(err)
	}
	out := map[string][]byte{}
	for _, kv := range resp.Kvs {
		// A report lbplane did not write is refused: its Envoys are nobody's.
		if v, err := s.openRecord(string(kv.Key), kv.ModRevision, kv.Value); err == nil {
			out[strings.TrimPrefix(string(kv.Key), s.prefix+etcdProxies)] = v
		}
	}
	return out, nil
}
