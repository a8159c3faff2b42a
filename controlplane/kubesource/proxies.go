package kubesource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Every replica serves its own Envoys, but one replica writes status: each replica publishes the proxies it
// serves in a Lease of its own, and the status writer reads them all. An expired Lease (a replica that died)
// stops counting after reportTTL.
const (
	reportLabel    = "lbplane.io/proxy-report"
	reportAnnot    = "lbplane.io/proxies"
	reportInterval = 2 * time.Second
	reportTTL      = 10 * time.Second
)

// reporter writes this replica's proxies; it runs on every replica (not leader-only).
type reporter struct{ s *Source }

func (r *reporter) NeedLeaderElection() bool { return false }

func replicaID() string {
	h, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return h + "-" + hex.EncodeToString(b)
}

func (r *reporter) Start(ctx context.Context) error {
	s := r.s
	name := "lbplane-proxies-" + s.id
	t := time.NewTicker(reportInterval)
	defer t.Stop()
	for {
		if err := r.write(ctx, name); err != nil && ctx.Err() == nil {
			s.Log.Warn("publishing this replica's proxies", "error", err)
		}
		select {
		case <-ctx.Done():
			// Leave no report behind: the others stop counting these proxies at once.
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s.mgr.GetClient().Delete(dctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.LeaderElectionNamespace}})
			return nil
		case <-t.C:
		}
	}
}

func (r *reporter) write(ctx context.Context, name string) error {
	s := r.s
	proxies, err := json.Marshal(s.Tracker.Proxies())
	if err != nil {
		return err
	}
	c := s.mgr.GetClient()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.LeaderElectionNamespace}}
	// A direct read: a cached one would watch Leases in every namespace, which lbplane may not.
	err = s.mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(lease), lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	create := apierrors.IsNotFound(err)
	lease.Labels = map[string]string{reportLabel: "true"}
	lease.Annotations = map[string]string{reportAnnot: string(proxies)}
	lease.Spec.HolderIdentity = ptr.To(s.id)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(reportTTL.Seconds()))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if create {
		return c.Create(ctx, lease)
	}
	return c.Update(ctx, lease)
}

// AllProxies returns the proxies of every live replica; without a namespace to report in, this replica's.
func (s *Source) AllProxies(ctx context.Context) []xdsserver.ProxyStatus {
	if s.LeaderElectionNamespace == "" {
		return s.Tracker.Proxies()
	}
	var leases coordinationv1.LeaseList
	if err := s.mgr.GetAPIReader().List(ctx, &leases, client.InNamespace(s.LeaderElectionNamespace), client.MatchingLabels{reportLabel: "true"}); err != nil {
		s.Log.Warn("reading the replicas' proxies; using this replica's", "error", err)
		return s.Tracker.Proxies()
	}
	var out []xdsserver.ProxyStatus
	for _, l := range leases.Items {
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
			time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			continue
		}
		var ps []xdsserver.ProxyStatus
		if json.Unmarshal([]byte(l.Annotations[reportAnnot]), &ps) == nil {
			out = append(out, ps...)
		}
	}
	return out
}
