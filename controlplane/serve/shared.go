package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lbplane/lbplane/atomicfile"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Store kinds (--store).
const (
	StoreBolt = "bbolt"
	StoreEtcd = "etcd"
)

// openStore opens the store --store names: the embedded bbolt file in the data directory, or etcd shared
// with other replicas (then the CA and tokens come from etcd too, sealed with the secret key).
func openStore(ctx context.Context, cfg *Config) (store.Store, *store.Etcd, error) {
	switch cfg.Store {
	case "", StoreBolt:
		st, err := store.Open(cfg.DataDir)
		return st, nil, err
	case StoreEtcd:
	default:
		return nil, nil, fmt.Errorf("--store %q: want %s or %s", cfg.Store, StoreBolt, StoreEtcd)
	}
	if cfg.Kubernetes != nil {
		return nil, nil, errors.New("--store etcd: not with --kubernetes (policies come from the API server there)")
	}
	if cfg.EtcdSecretKeyFile == "" {
		return nil, nil, errors.New("--store etcd needs --etcd-secret-key-file: the CA and tokens every replica shares are sealed in etcd with it")
	}
	key, err := store.ReadSecretKey(cfg.EtcdSecretKeyFile)
	if err != nil {
		return nil, nil, err
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = defaultReplicaID()
	}
	ecfg := cfg.Etcd
	ecfg.Log, ecfg.SecretKey = cfg.Log, key
	st, err := store.OpenEtcd(ecfg, cfg.ReplicaID)
	if err != nil {
		return nil, nil, err
	}
	cfg.etcdInsecure = st.Insecure()
	cfg.Log.Info("policies are kept in etcd, shared with the other replicas", "endpoints", ecfg.Endpoints, "prefix", st.Prefix(), "replica", cfg.ReplicaID)
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sec, created, err := st.LoadOrCreateSecrets(lctx, key, newSecrets)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if cfg.XDSTLS == nil && !cfg.XDSInsecure || cfg.APITLSAuto {
		ca, err := pki.ParseCA("etcd", sec.CACert, sec.CAKey)
		if err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("lbplane's CA in etcd: %w", err)
		}
		cfg.sharedCA = ca
	}
	// The CA's certificate (public), which lbctl on this host trusts the push API's certificate by
	// (LBPLANE_CA_FILE): the data directory holds no pki/ in etcd mode.
	// Before the tokens: lbctl --wait-server waits for the token file.
	if cfg.sharedCA != nil {
		if err := atomicfile.Write(filepath.Join(cfg.DataDir, SharedCACertFile), sec.CACert, 0o644); err != nil {
			st.Close()
			return nil, nil, err
		}
	}
	// The tokens are written to the data directory as well, where lbctl setups read them (LBPLANE_TOKEN_FILE).
	for _, t := range []struct {
		configured *string
		value      string
		file       string
	}{{&cfg.Token, sec.Token, TokenFile}, {&cfg.ReadOnlyToken, sec.ReadOnlyToken, ReadOnlyTokenFile}} {
		if *t.configured != "" {
			continue
		}
		*t.configured = t.value
		if err := atomicfile.Write(filepath.Join(cfg.DataDir, t.file), []byte(t.value+"\n"), 0o600); err != nil {
			st.Close()
			return nil, nil, err
		}
	}
	if created {
		cfg.Log.Info("created lbplane's CA and push API tokens, sealed in etcd", "prefix", st.Prefix())
	} else {
		cfg.Log.Info("loaded lbplane's CA and push API tokens from etcd", "prefix", st.Prefix())
	}
	return st, st, nil
}

func newSecrets() (*store.Secrets, error) {
	certPEM, keyPEM, err := pki.NewCAPEM()
	if err != nil {
		return nil, err
	}
	tok := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	return &store.Secrets{CACert: certPEM, CAKey: keyPEM, Token: tok(), ReadOnlyToken: tok()}, nil
}

func defaultReplicaID() string {
	h, _ := os.Hostname()
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", h, os.Getpid(), hex.EncodeToString(b))
}

func setStoreMetrics(st store.Store, m *metrics.Metrics) {
	switch s := st.(type) {
	case *store.Bolt:
		s.Metrics = m
	case *store.Etcd:
		s.Metrics = m
	}
}

// storeStatus is what GET /v1/version and lbctl status say of the shared store.
func storeStatus(cfg *Config, st *store.Etcd, versions func() map[string]string) func() *apiwire.StoreStatus {
	clients := &replicaClients{st: st}
	return func() *apiwire.StoreStatus {
		out := &apiwire.StoreStatus{Kind: StoreEtcd, Replica: cfg.ReplicaID, Role: "follower", Versions: versions()}
		if st.Leader() {
			out.Role = "leader"
		}
		if t := st.StaleSince(); !t.IsZero() {
			out.Stale, out.StaleSince = true, t
		}
		for _, r := range st.Refused() {
			out.Refused = append(out.Refused, apiwire.RefusedRecord{Key: r.Key, ModRevision: r.ModRevision, Since: r.Since, Reason: r.Reason})
		}
		out.Clients = clients.get()
		return out
	}
}

// storeHealth is /readyz's view of the shared store: this replica's role while it reaches etcd, an error
// while it is cut off.
func storeHealth(cfg *Config, st *store.Etcd) func() (string, error) {
	if st == nil {
		return nil
	}
	return func() (string, error) {
		if t := st.StaleSince(); !t.IsZero() {
			return "", fmt.Errorf("stale: cut off from etcd since %s; serving the last good state, refusing pushes (replica %s)", t.UTC().Format(time.RFC3339), cfg.ReplicaID)
		}
		role := "follower"
		if st.Leader() {
			role = "leader"
		}
		return fmt.Sprintf("etcd store, replica %s, role %s", cfg.ReplicaID, role), nil
	}
}

// followStore keeps this replica on what the other replicas write: policies into the engine, revocations
// into the guard; the leader also prunes the revocations whose certificates have all expired.
//
// A staged push stores its rollout before its policies: the rollouts are read again before the policies,
// so that a new generation reaches only the canaries here too, whichever watch reports first.
func followStore(ctx context.Context, cfg *Config, st *store.Etcd, api *pushapi.Server, guard *xdsserver.Guard, ro *rollout.Controller, changing *changeRequests) {
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.Changes():
			// What another replica wrote is a change being made here too, until it is sent to the Envoys
			// (then the tracker says so): work that can wait steps aside for it.
			changing.during(func() {
				if ro != nil {
					if err := ro.Reload(); err != nil {
						cfg.Log.Error("reading the rollouts; trying again in a second", "error", err)
						time.AfterFunc(time.Second, st.Resync)
						return
					}
				}
				if err := api.Sync(); err != nil {
					cfg.Log.Error("reading the policies other replicas wrote; trying again in a second", "error", err)
					time.AfterFunc(time.Second, st.Resync)
				}
			})
		case <-st.RevocationChanges():
			if guard == nil {
				continue
			}
			rs, err := st.Revocations()
			if err != nil {
				cfg.Log.Error("reading the revocations", "error", err)
				continue
			}
			if n := guard.SetRevocations(rs); n > 0 {
				cfg.Log.Info("closed revoked Envoy connections", "count", n)
			}
		case <-prune.C:
			if guard != nil && st.Leader() {
				if err := st.PruneRevocations(time.Now()); err != nil {
					cfg.Log.Error("pruning the revocations", "error", err)
				}
			}
		}
	}
}

// replicaClients keeps clientsPerReplica's last answer for GET /v1/version, read again in the background
// at most every proxiesInterval: a status request never waits on etcd, which a replica cut off from it would
// make it do until the store's timeout.
type replicaClients struct {
	st         *store.Etcd
	mu         sync.Mutex
	at         time.Time
	counts     map[string]int
	refreshing bool
}

// get returns the counts last read (nil before the first read ends, or when the store could not be read),
// and starts a read when they are older than proxiesInterval and the replica reaches etcd.
func (r *replicaClients) get() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.refreshing && time.Since(r.at) >= proxiesInterval && r.st.StaleSince().IsZero() {
		r.refreshing = true
		go func() {
			counts := clientsPerReplica(r.st)
			r.mu.Lock()
			r.counts, r.at, r.refreshing = counts, time.Now(), false
			r.mu.Unlock()
		}()
	}
	return r.counts
}

// clientsPerReplica counts the Envoys each live replica last published (fleetProxies.publish), or is nil
// when the store cannot be read.
func clientsPerReplica(st *store.Etcd) map[string]int {
	reports, err := st.Proxies()
	if err != nil {
		return nil
	}
	out := make(map[string]int, len(reports))
	for id, b := range reports {
		var ps []json.RawMessage
		if json.Unmarshal(b, &ps) == nil {
			out[id] = len(ps)
		}
	}
	return out
}
