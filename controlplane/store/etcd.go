package store

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// EtcdConfig says how to reach the etcd cluster several lbplane replicas share.
type EtcdConfig struct {
	Endpoints []string
	// CACert, Cert and Key are the client TLS files (all optional; a CA alone verifies the server, a
	// certificate and key authenticate lbplane to etcd).
	CACert, Cert, Key string
	// Prefix is the key prefix everything lbplane keeps lives under (DefaultEtcdPrefix when empty).
	Prefix string
	Log    *slog.Logger
	// Timeout bounds every request (5 s when 0); HealthInterval is how often the connection is checked
	// (1 s when 0). A replica whose check fails is stale until one succeeds.
	Timeout, HealthInterval time.Duration
	// Passive opens the store for a tool (lbplane store migrate): no election, no watch, no health checks.
	Passive bool
	// SecretKey is the 32-byte key of --etcd-secret-key-file: every record lbplane writes is authenticated
	// with a key derived from it, and a record that is not is refused (etcd_auth.go).
	SecretKey []byte
	// Insecure accepts etcd that is reached in plaintext, or without a client certificate, or that answers
	// clients who present none (--insecure-etcd): anyone who reaches it can then read and delete lbplane's
	// records. Without it such an etcd is refused.
	Insecure bool
}

// DefaultEtcdPrefix is where lbplane's keys live in etcd unless told otherwise.
const DefaultEtcdPrefix = "/lbplane/"

// The keys under the prefix.
const (
	etcdPolicies    = "policies/" // + namespace/name: a Record as JSON
	etcdVersion     = "version"   // rewritten by every policy write: its mod revision is the policies' revision
	etcdRevocations = "revocations"
	etcdLeader      = "leader"  // the election
	etcdSecrets     = "secrets" // the CA and tokens, encrypted (SealedSecrets)
)

// Etcd is the store several lbplane replicas share. Every policy write is one etcd transaction that
// succeeds only if no other replica wrote since the writer last read (the version key's mod revision), so
// the validation and conflict rules a push is checked against are the ones of the whole store. Changes made
// by other replicas are announced on Changes.
type Etcd struct {
	Metrics *metrics.Metrics
	Client  *clientv3.Client
	prefix  string
	log     *slog.Logger
	timeout time.Duration

	mu       sync.Mutex
	cache    map[string]cachedRecord // by etcd key: what List decoded, reused while its mod revision holds
	cacheRev int64                   // the store revision cache is at

	changes     chan struct{}
	revocations chan struct{}
	// rolloutChanges is signalled when a stored rollout changes; rolloutRevs are the rollouts' mod
	// revisions as this replica last read or wrote them (guarded by mu).
	rolloutChanges chan struct{}
	rolloutRevs    map[string]int64
	// overrideChanges and overrideRevs are the same for the endpoint overrides (etcd_overrides.go).
	overrideChanges chan struct{}
	overrideRevs    map[string]int64
	// feed is what the watch delivered of the policies' changes, for ChangesSince (guarded by mu).
	feed       policyFeed
	staleSince atomic.Pointer[time.Time]
	leader     atomic.Bool
	cancel     context.CancelFunc
	done       sync.WaitGroup

	// auth authenticates every record lbplane writes; refused are the records found that lbplane did not
	// write; secretKey seals the CA and tokens.
	auth      recordAuth
	secretKey []byte
	refused   refusals
	// insecure says why this etcd was accepted only under --insecure-etcd (empty when it was not needed).
	insecure []string
}

type cachedRecord struct {
	modRev int64
	rec    *Record // nil: a record lbplane did not write, refused
}

// policyFeed is the policy changes the watch delivered: every change after revision from is in events,
// in revision order. listedRev and listedAt are what the last List returned and the store revision it
// read at: no policy changed between the two.
type policyFeed struct {
	from                int64
	events              []policyEvent
	listedRev, listedAt int64
}

type policyEvent struct {
	rev int64
	key objkey.Key
	rec *Record // nil: deleted
}

// maxFeedEvents bounds the changes kept for a reader that does not come to read them; past it the feed
// starts over, and that reader lists the store again.
const maxFeedEvents = 100000

// OpenEtcd connects to etcd and starts watching it, checking the connection and campaigning for
// leadership under the prefix with the given id (what Leader reports while this replica holds it).
func OpenEtcd(cfg EtcdConfig, id string) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("--etcd-endpoints: at least one endpoint")
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("--etcd-prefix %q: must start and end with a slash", prefix)
	}
	auth, err := newRecordAuth(cfg.SecretKey)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := etcdTLS(cfg)
	if err != nil {
		return nil, err
	}
	insecure, err := checkEtcdSecurity(cfg, tlsConfig)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, TLS: tlsConfig, DialTimeout: timeout,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		// The client's own zap logs would interleave JSON with lbplane's log; lbplane logs what it makes of errors.
		Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	s := &Etcd{Client: client, prefix: prefix, log: log, timeout: timeout, cache: map[string]cachedRecord{},
		changes: make(chan struct{}, 1), revocations: make(chan struct{}, 1), rolloutChanges: make(chan struct{}, 1), overrideChanges: make(chan struct{}, 1),
		feed: policyFeed{from: math.MaxInt64}, auth: auth, secretKey: cfg.SecretKey, refused: refusals{log: log}, insecure: insecure}
	// The first read must succeed: a replica that never saw the store has no last good state to serve.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	version, err := client.Get(ctx, prefix+etcdVersion)
	cancel()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	// Policies written before lbplane authenticated its records would all be refused, and the replica would
	// serve its Envoys nothing: it does not start on them. The version key tells, as every write rewrites it.
	if len(version.Kvs) > 0 && !cfg.Passive {
		if _, err := auth.open(prefix+etcdVersion, version.Kvs[0].Value); err != nil {
			client.Close()
			return nil, fmt.Errorf("etcd's %s%s was not written by lbplane with this --etcd-secret-key-file (an lbplane that did not authenticate "+
				"its records wrote the prefix last, or another client did): every record there would be refused. Stop every replica, "+
				"check and authenticate the records with lbplane store authenticate --dry-run, then without it (docs/ha.md), and start again",
				prefix, etcdVersion)
		}
	}
	if cfg.Insecure {
		for _, why := range insecure {
			log.Warn("INSECURE (--insecure-etcd): " + why + "; anyone who reaches etcd can read lbplane's policies and delete them (records they write are refused)")
		}
	} else if ep, open := openToAnyone(cfg.Endpoints, tlsConfig, prefix, min(timeout, 2*time.Second)); open {
		client.Close()
		return nil, fmt.Errorf("etcd %s answers clients that present no certificate: anyone who reaches it can read and delete lbplane's records; "+
			"start etcd with --client-cert-auth and --trusted-ca-file (or enable its authentication), or accept this with --insecure-etcd", ep)
	}
	ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.Passive {
		return s, nil
	}
	interval := cfg.HealthInterval
	if interval <= 0 {
		interval = time.Second
	}
	s.done.Add(3)
	go func() { defer s.done.Done(); s.watch(ctx) }()
	go func() { defer s.done.Done(); s.health(ctx, interval) }()
	go func() { defer s.done.Done(); s.campaign(ctx, id) }()
	return s, nil
}

func etcdTLS(cfg EtcdConfig) (*tls.Config, error) {
	if cfg.CACert == "" && cfg.Cert == "" && cfg.Key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pem, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("--etcd-cacert: no PEM certificate in the file")
		}
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	if cfg.Cert != "" {
		pair, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// Insecure says why this etcd was accepted only under --insecure-etcd (nil when it was accepted without).
func (s *Etcd) Insecure() []string { return slices.Clone(s.insecure) }

// Close stops watching and campaigning (resigning leadership) and closes the client.
func (s *Etcd) Close() error {
	s.cancel()
	s.done.Wait()
	return s.Client.Close()
}

// Prefix is the key prefix the store lives under.
func (s *Etcd) Prefix() string { return s.prefix }

// Changes receives a value after another writer changed the policies (and after a replica that was cut
// off reaches etcd again): the receiver lists them again.
func (s *Etcd) Changes() <-chan struct{} { return s.changes }

// Resync asks the receiver of Changes to list the policies again (after a read that failed).
func (s *Etcd) Resync() { s.signal(s.changes) }

// RevocationChanges receives a value after the stored revocations changed.
func (s *Etcd) RevocationChanges() <-chan struct{} { return s.revocations }

// Leader reports whether this replica holds the leadership (and can reach etcd).
func (s *Etcd) Leader() bool { return s.leader.Load() && s.StaleSince().IsZero() }

// StaleSince is when this replica lost etcd (zero while it reaches it).
func (s *Etcd) StaleSince() time.Time {
	if t := s.staleSince.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func (s *Etcd) unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
}

func (s *Etcd) ctx() (context.Context, context.CancelFunc) {
	// WithRequireLeader: a member cut off from its cluster's majority answers no request, instead of
	// answering from what it had.
	return context.WithTimeout(clientv3.WithRequireLeader(context.Background()), s.timeout)
}

// List returns every record and the policies' revision (the version key's mod revision), read in one
// consistent transaction; only records whose mod revision moved since the last List are decoded.
func (s *Etcd) List() (out []*Record, rev int64, err error) {
	defer func() { s.Metrics.StoreOp("list", err) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := s.ctx()
	defer cancel()
	pol := s.prefix + etcdPolicies
	resp, err := s.Client.Txn(ctx).Then(
		clientv3.OpGet(s.prefix+etcdVersion),
		clientv3.OpGet(pol, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(pol, clientv3.WithPrefix(), clientv3.WithMinModRev(s.cacheRev+1)),
	).Commit()
	if err != nil {
		return nil, 0, s.unavailable(err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		rev = kvs[0].ModRevision
	}
	fresh := map[string]cachedRecord{}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		r, err := s.decodePolicy(string(kv.Key), kv.Value)
		if err != nil && !errors.Is(err, errNotLbplanes) {
			return nil, 0, err
		}
		fresh[string(kv.Key)] = cachedRecord{modRev: kv.ModRevision, rec: r}
	}
	cache := make(map[string]cachedRecord, len(s.cache))
	refused := map[string]RefusedRecord{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		k := string(kv.Key)
		c, ok := fresh[k]
		if !ok {
			if c, ok = s.cache[k]; !ok || c.modRev != kv.ModRevision {
				// Cannot happen with a consistent read; start over rather than serve a guess.
				s.cache, s.cacheRev = map[string]cachedRecord{}, 0
				return nil, 0, fmt.Errorf("record %s: changed between two reads of one transaction", k)
			}
		}
		cache[k] = c
		if c.rec == nil {
			refused[k] = RefusedRecord{Key: k, ModRevision: c.modRev, Reason: errNotLbplanes.Error()}
			continue
		}
		out = append(out, c.rec)
	}
	s.refused.replace(func(k string) bool { return strings.HasPrefix(k, pol) }, refused)
	s.cache, s.cacheRev = cache, resp.Header.Revision
	s.feed.listedRev, s.feed.listedAt = rev, resp.Header.Revision
	byStoredKey(out)
	return out, rev, nil
}

// ChangesSince returns what the other writers changed since revision base (records put, keys deleted;
// a record this replica wrote itself after base is included too), and the revision the policies are
// at with them: the watch's events, so nothing is read from etcd and only the changed records are
// decoded. ok is false when the watch cannot tell (it started after base, or restarted, or the store is
// passive): the caller lists the store instead. A write planned on the revision returned may still
// meet ErrConflict when the watch is behind; the caller then lists the store.
func (s *Etcd) ChangesSince(base int64) (puts []*Record, deletes []objkey.Key, rev int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.feed
	// Every change after from is in events; and none happened between what the last List returned and
	// the revision it read at.
	if base < f.from && (base != f.listedRev || f.listedAt < f.from) {
		return nil, nil, 0, false
	}
	i, _ := slices.BinarySearchFunc(f.events, base+1, func(e policyEvent, r int64) int { return cmp.Compare(e.rev, r) })
	last := map[objkey.Key]*Record{}
	var order []objkey.Key
	rev = base
	for _, e := range f.events[i:] {
		if _, seen := last[e.key]; !seen {
			order = append(order, e.key)
		}
		last[e.key] = e.rec
		rev = e.rev
	}
	for _, k := range order {
		if r := last[k]; r != nil {
			puts = append(puts, r)
		} else {
			deletes = append(deletes, k)
		}
	}
	// The reader is at base now: what came before is no longer needed.
	f.events = slices.Delete(f.events, 0, i)
	f.from = base
	return puts, deletes, rev, true
}

// restartFeed starts the policy feed over at revision from (a watch that starts there), dropping what it
// held; the caller holds mu.
func (s *Etcd) restartFeed(from int64) {
	s.feed.from, s.feed.events = from, nil
}

// feedEvents adds a watch response's policy events to the feed; it reports whether any changed a policy.
func (s *Etcd) feedEvents(evs []*clientv3.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pol := s.prefix + etcdPolicies
	for _, ev := range evs {
		var rec *Record
		if ev.Type == clientv3.EventTypePut {
			r, err := s.decodePolicy(string(ev.Kv.Key), ev.Kv.Value)
			switch {
			case errors.Is(err, errNotLbplanes):
				// Refused: to this replica the policy is gone, as it is to one that lists the store.
				s.refused.refuse(string(ev.Kv.Key), ev.Kv.ModRevision, err)
			case err != nil:
				// The reader lists the store and reports the record there.
				s.log.Error("a stored policy does not decode", "key", string(ev.Kv.Key), "error", err)
				s.restartFeed(ev.Kv.ModRevision)
				continue
			default:
				s.refused.forget(string(ev.Kv.Key))
			}
			rec = r
		} else {
			s.refused.forget(string(ev.Kv.Key))
		}
		key, ok := objkey.Parse(strings.TrimPrefix(string(ev.Kv.Key), pol))
		if !ok {
			// Not a policy's key "namespace/name": lbplane writes none, so a record there was refused above
			// (it does not carry lbplane's authentication), and no policy changed.
			continue
		}
		e := policyEvent{rev: ev.Kv.ModRevision, key: key, rec: rec}
		if len(s.feed.events) >= maxFeedEvents {
			s.restartFeed(s.feed.events[len(s.feed.events)-1].rev)
		}
		s.feed.events = append(s.feed.events, e)
	}
	return len(evs) > 0
}

// decodePolicy decodes the policy record stored at etcd key at: errNotLbplanes when lbplane did not write
// it there.
func (s *Etcd) decodePolicy(at string, stored []byte) (*Record, error) {
	v, err := s.auth.open(at, stored)
	if err != nil {
		return nil, err
	}
	r := &Record{}
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("record %s: %w", at, err)
	}
	if s.prefix+etcdPolicies+r.Key().String() != at {
		return nil, fmt.Errorf("record %s: holds policy %s", at, r.Key())
	}
	return r, nil
}

// Apply writes puts and deletes in one etcd transaction, all or nothing, if the policies are still at
// revision base (ErrConflict otherwise).
func (s *Etcd) Apply(base int64, puts []*Record, deletes []objkey.Key) (rev int64, err error) {
	defer func() { s.Metrics.StoreOp("apply", err) }()
	if t := s.StaleSince(); !t.IsZero() {
		return 0, fmt.Errorf("%w: this replica lost etcd at %s; it serves its last good state and takes no writes until it reaches etcd again",
			ErrUnavailable, t.UTC().Format(time.RFC3339))
	}
	ops := make([]clientv3.Op, 0, len(puts)+len(deletes)+1)
	for _, r := range puts {
		v, err := json.Marshal(r)
		if err != nil {
			return 0, err
		}
		at := s.prefix + etcdPolicies + r.Key().String()
		ops = append(ops, clientv3.OpPut(at, s.auth.seal(at, v)))
	}
	for _, k := range deletes {
		ops = append(ops, clientv3.OpDelete(s.prefix+etcdPolicies+k.String()))
	}
	if len(ops) == 0 {
		// Nothing to write: no transaction, so the other replicas plan on the same revision.
		return base, nil
	}
	ops = append(ops, clientv3.OpPut(s.prefix+etcdVersion, s.auth.seal(s.prefix+etcdVersion, nil)))
	// A member lost mid-request (a partition, an etcd election) fails the request without saying whether it
	// was applied; it is sent again, through another member. That is safe: the compare on the version key
	// fails if the first one was applied, and the caller then reads what the store holds.
	var resp *clientv3.TxnResponse
	for attempt := 1; ; attempt++ {
		ctx, cancel := s.ctx()
		resp, err = s.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.prefix+etcdVersion), "=", base)).Then(ops...).Commit()
		cancel()
		if err == nil || attempt == 3 || errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) || !s.StaleSince().IsZero() {
			break
		}
		s.log.Warn("an etcd write failed; sending it again", "attempt", attempt, "error", err)
		time.Sleep(300 * time.Millisecond)
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return 0, fmt.Errorf("%w: %d policies in one etcd transaction: %v (raise etcd's --max-txn-ops and --max-request-bytes, or push fewer at once)",
			ErrTooLarge, len(puts)+len(deletes), err)
	}
	if err != nil {
		return 0, s.unavailable(err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// Revocations returns the revocations stored.
func (s *Etcd) Revocations() ([]apiwire.Revocation, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	key := s.prefix + etcdRevocations
	resp, err := s.Client.Get(ctx, key)
	if err != nil {
		return nil, s.unavailable(err)
	}
	var out []apiwire.Revocation
	if len(resp.Kvs) > 0 {
		// Revocations lbplane did not write are refused: as if there were none, as on every replica.
		v, err := s.openRecord(key, resp.Kvs[0].ModRevision, resp.Kvs[0].Value)
		if err != nil {
			return nil, nil
		}
		if err := json.Unmarshal(v, &out); err != nil {
			return nil, fmt.Errorf("revocations: %w", err)
		}
	} else {
		s.refused.forget(key)
	}
	return out, nil
}

// PutRevocations stores rs merged with what the store holds (a revocation made on another replica that
// this one has not seen yet is kept), in one software transaction.
func (s *Etcd) PutRevocations(rs []apiwire.Revocation) error {
	return s.editRevocations(func(stored []apiwire.Revocation) []apiwire.Revocation {
		next := slices.Clone(rs)
		for _, r := range stored {
			if !slices.ContainsFunc(next, func(n apiwire.Revocation) bool { return sameRevocation(n, r) }) {
				next = append(next, r)
			}
		}
		return next
	})
}

// PruneRevocations drops the stored revocations whose certificates have all expired by now (the leader's
// job: one writer, so the others only read).
func (s *Etcd) PruneRevocations(now time.Time) error {
	return s.editRevocations(func(stored []apiwire.Revocation) []apiwire.Revocation {
		return slices.DeleteFunc(stored, func(r apiwire.Revocation) bool { return !r.Until.IsZero() && r.Until.Before(now) })
	})
}

// editRevocations rewrites the stored revocations with edit, in one software transaction (retried when
// another replica wrote them meanwhile).
func (s *Etcd) editRevocations(edit func([]apiwire.Revocation) []apiwire.Revocation) error {
	ctx, cancel := s.ctx()
	defer cancel()
	key := s.prefix + etcdRevocations
	_, err := concurrency.NewSTM(s.Client, func(stm concurrency.STM) error {
		var stored []apiwire.Revocation
		var cur []byte
		if sealed := stm.Get(key); sealed != "" {
			// Revocations lbplane did not write are overwritten with lbplane's.
			if v, err := s.auth.open(key, []byte(sealed)); err == nil {
				cur = v
				if err := json.Unmarshal(v, &stored); err != nil {
					return fmt.Errorf("revocations: %w", err)
				}
			}
		}
		v, err := json.Marshal(edit(stored))
		if err != nil {
			return err
		}
		if cur == nil || string(v) != string(cur) {
			stm.Put(key, s.auth.seal(key, v))
		}
		return nil
	}, concurrency.WithAbortContext(ctx))
	return s.unavailable(err)
}

func sameRevocation(a, b apiwire.Revocation) bool {
	return a.NodeID == b.NodeID && a.Serial == b.Serial && a.Group == b.Group && a.At.Equal(b.At)
}

func (s *Etcd) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// watch announces changes of the policies (their events kept for ChangesSince) and of the revocations
// and rollouts.
func (s *Etcd) watch(ctx context.Context) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		// The policies are watched from a revision read now: every change after it comes as an event.
		gctx, gcancel := context.WithTimeout(wctx, s.timeout)
		start, err := s.Client.Get(gctx, s.prefix+etcdVersion)
		gcancel()
		if err != nil {
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		s.mu.Lock()
		s.restartFeed(start.Header.Revision)
		s.mu.Unlock()
		// One watch over the whole prefix: the policies feed ChangesSince, the revocations and rollouts are
		// announced, and every record written is checked to be lbplane's.
		wc := s.Client.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
		// The records outside policies/ are checked as they are at the watch's start (List checks the policies).
		s.checkOthers(wctx, start.Header.Revision)
		// Anything written while no watch was open is read now.
		s.signal(s.changes)
		s.signal(s.revocations)
		s.signal(s.rolloutChanges)
		s.signal(s.overrideChanges)
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case r, ok := <-wc:
				if !ok || r.Err() != nil {
					break loop
				}
				s.dispatch(r.Events)
			}
		}
		cancel()
		// The events a restarted watch would miss are not known: the feed starts over with it.
		s.mu.Lock()
		s.restartFeed(math.MaxInt64)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dispatch hands a watch response's events on: the policies' to the feed, the revocations' and rollouts'
// as signals; every other record put is checked to be lbplane's (the policies, revocations and rollouts are
// checked where they are read).
func (s *Etcd) dispatch(evs []*clientv3.Event) {
	pol := s.prefix + etcdPolicies
	var policies []*clientv3.Event
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		sub := strings.TrimPrefix(key, s.prefix)
		switch {
		case strings.HasPrefix(key, pol):
			policies = append(policies, ev)
			continue
		case sub == etcdRevocations:
			s.signal(s.revocations)
		case strings.HasPrefix(sub, etcdRollouts):
			s.signal(s.rolloutChanges)
		case strings.HasPrefix(sub, etcdOverrides):
			s.signal(s.overrideChanges)
		}
		if ev.Type == clientv3.EventTypeDelete {
			s.refused.forget(key)
		} else if err := s.verifyStored(key, ev.Kv.Value); err != nil {
			s.refused.refuse(key, ev.Kv.ModRevision, err)
		} else {
			s.refused.forget(key)
		}
	}
	if len(policies) > 0 && s.feedEvents(policies) {
		s.signal(s.changes)
	}
}

// checkOthers checks every record under the prefix outside policies/ as it was at revision rev, and makes
// the refusals among them what it found.
func (s *Etcd) checkOthers(ctx context.Context, rev int64) {
	pol := s.prefix + etcdPolicies
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	// Two ranges: before policies/ and after it ('/' + 1 is '0').
	ranges := [][2]string{{s.prefix, pol}, {strings.TrimSuffix(pol, "/") + "0", end}}
	found := map[string]RefusedRecord{}
	for _, r := range ranges {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.Client.Get(rctx, r[0], clientv3.WithRange(r[1]), clientv3.WithRev(rev))
		cancel()
		if err != nil {
			// The next watch start checks again; a record written meanwhile is checked as it comes.
			return
		}
		for _, kv := range resp.Kvs {
			if err := s.verifyStored(string(kv.Key), kv.Value); err != nil {
				found[string(kv.Key)] = RefusedRecord{Key: string(kv.Key), ModRevision: kv.ModRevision, Reason: err.Error()}
			}
		}
	}
	s.refused.replace(func(k string) bool { return !strings.HasPrefix(k, pol) }, found)
}

// health reads the version key every interval (a linearizable read: the majority must answer); a failure
// makes the replica stale until a read succeeds again, and then it catches up.
func (s *Etcd) health(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), min(s.timeout, 2*interval))
		_, err := s.Client.Get(rctx, s.prefix+etcdVersion)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && s.StaleSince().IsZero():
			now := time.Now()
			s.staleSince.Store(&now)
			s.log.Error("lost etcd: serving the last good state, refusing pushes", "error", err)
		case err == nil && !s.StaleSince().IsZero():
			s.log.Info("reached etcd again", "staleFor", time.Since(s.StaleSince()).Round(time.Millisecond).String())
			s.staleSince.Store(nil)
			s.signal(s.changes)
			s.signal(s.revocations)
			s.signal(s.rolloutChanges)
		}
	}
}

// campaign holds the election under the prefix: one replica at a time is leader, for as long as its lease
// (5 s) is kept alive; a replica cut off from etcd loses it when the lease expires, and another wins.
func (s *Etcd) campaign(ctx context.Context, id string) {
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(s.Client, concurrency.WithTTL(5), concurrency.WithContext(ctx))
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		e := concurrency.NewElection(sess, s.prefix+etcdLeader)
		// The candidate's key is the election's prefix and its lease (concurrency.Election); its value, the
		// id, is authenticated like every record.
		at := fmt.Sprintf("%s%s/%x", s.prefix, etcdLeader, sess.Lease())
		if err := e.Campaign(ctx, s.auth.seal(at, []byte(id))); err == nil {
			s.leader.Store(true)
			s.log.Info("this replica is the leader", "id", id)
			select {
			case <-ctx.Done():
				rctx, cancel := context.WithTimeout(context.Background(), s.timeout)
				e.Resign(rctx)
				cancel()
			case <-sess.Done():
			}
			s.leader.Store(false)
			s.log.Info("this replica is no longer the leader", "id", id)
		}
		sess.Close()
	}
}

// LeaderID is the id of the replica holding the leadership, as etcd has it.
func (s *Etcd) LeaderID() (string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	resp, err := s.Client.Get(ctx, s.prefix+etcdLeader, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", s.unavailable(err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	kv := resp.Kvs[0]
	id, err := s.openRecord(string(kv.Key), kv.ModRevision, kv.Value)
	if err != nil {
		return "", fmt.Errorf("the election's first candidate %s: %w", kv.Key, err)
	}
	return string(id), nil
}
