package kubesource

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Every replica serves its own Envoys, but one replica writes status: each replica publishes the proxies it
// serves in a ConfigMap of its own, owned by its Pod so that Kubernetes' garbage collector removes it with the
// Pod (a killed replica leaves nothing behind for long), and the status writer reads them all by label. A
// report whose heartbeat is older than reportTTL (a replica that died and whose Pod is not gone yet, or a
// replica outside a Pod) stops counting.
const (
	reportLabel    = "lbplane.io/proxy-report"
	heartbeatKey   = "heartbeat"
	proxiesKey     = "proxies" // proxies-0, proxies-1, ...: JSON arrays of xdsserver.ProxyStatus
	reportInterval = 2 * time.Second
	reportTTL      = 5 * reportInterval
	// A ConfigMap holds at most 1 MiB: the proxies are split in keys of reportKeyBytes, and whatever goes
	// past reportMaxBytes is left out (with a warning) rather than have every write refused.
	reportKeyBytes = 256 << 10
	reportMaxBytes = 768 << 10
)

// reporter writes this replica's proxies; it runs on every replica (not leader-only).
type reporter struct {
	s       *Source
	dropped int // proxies left out of the last report, to warn once per change
}

func (r *reporter) NeedLeaderElection() bool { return false }

func replicaID() string {
	h, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return strings.ToLower(h) + "-" + hex.EncodeToString(b)
}

// reportName is this replica's ConfigMap: named after its Pod, or, outside a Pod (standalone, tests), after
// the host and a random suffix; such a report has no owner and is only ever removed on a clean shutdown, so
// a killed standalone replica's report stays until deleted by hand (it stops counting after reportTTL).
func (s *Source) reportName() string {
	if s.ownedByPod() {
		return "lbplane-proxies-" + s.PodName
	}
	return "lbplane-proxies-" + s.id
}

func (r *reporter) Start(ctx context.Context) error {
	s := r.s
	name := s.reportName()
	if !s.ownedByPod() {
		// Standalone or in tests: the report has no owner, and only a clean shutdown removes it.
		s.Log.Info("no POD_NAME/POD_NAMESPACE/POD_UID for the report's namespace: this replica's proxy report has no owner Pod and is not garbage-collected",
			"configmap", name, "namespace", s.LeaderElectionNamespace)
	}
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
			if err := s.mgr.GetClient().Delete(dctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.LeaderElectionNamespace}}); err != nil && !apierrors.IsNotFound(err) {
				s.Log.Warn("deleting this replica's proxy report", "error", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// reportData splits the proxies into keys of at most keyBytes of JSON each, up to maxBytes in all; it
// returns how many proxies did not fit.
func reportData(proxies []xdsserver.ProxyStatus, keyBytes, maxBytes int) (map[string]string, int, error) {
	data := map[string]string{}
	var chunk []json.RawMessage
	size, total := 2, 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		data[fmt.Sprintf("%s-%d", proxiesKey, len(data))] = string(b)
		chunk, size = nil, 2
		return nil
	}
	for i, p := range proxies {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, 0, err
		}
		if total+len(b)+3 > maxBytes { // the comma, and the brackets should it open a key
			if err := flush(); err != nil {
				return nil, 0, err
			}
			return data, len(proxies) - i, nil
		}
		if size+len(b)+1 > keyBytes && len(chunk) > 0 {
			if err := flush(); err != nil {
				return nil, 0, err
			}
		}
		if len(chunk) == 0 {
			total += 2
		}
		chunk = append(chunk, b)
		size += len(b) + 1
		total += len(b) + 1
	}
	return data, 0, flush()
}

func (r *reporter) write(ctx context.Context, name string) error {
	s := r.s
	data, dropped, err := reportData(s.Tracker.Proxies(), reportKeyBytes, reportMaxBytes)
	if err != nil {
		return err
	}
	if dropped != r.dropped {
		if dropped > 0 {
			s.Log.Warn("too many proxies for this replica's report: the status writer does not see them all", "left out", dropped)
		}
		r.dropped = dropped
	}
	data[heartbeatKey] = time.Now().UTC().Format(time.RFC3339Nano)
	c := s.mgr.GetClient()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.LeaderElectionNamespace}}
	// A direct read: a cached one would watch ConfigMaps in every namespace, which lbplane may not.
	err = s.mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(cm), cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	create := apierrors.IsNotFound(err)
	cm.Labels = map[string]string{reportLabel: "true"}
	if s.ownedByPod() {
		// No blockOwnerDeletion: it would need delete rights on Pods, and nothing waits for this object.
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: s.PodName, UID: s.PodUID}}
	}
	cm.Data = data
	if create {
		return c.Create(ctx, cm)
	}
	return c.Update(ctx, cm)
}

// AllProxies returns the proxies of every live replica; without a namespace to report in, this replica's.
func (s *Source) AllProxies(ctx context.Context) []xdsserver.ProxyStatus {
	if s.LeaderElectionNamespace == "" {
		return s.Tracker.Proxies()
	}
	var cms corev1.ConfigMapList
	if err := s.mgr.GetAPIReader().List(ctx, &cms, client.InNamespace(s.LeaderElectionNamespace), client.MatchingLabels{reportLabel: "true"}); err != nil {
		s.Log.Warn("reading the replicas' proxies; using this replica's", "error", err)
		return s.Tracker.Proxies()
	}
	return liveProxies(cms.Items, time.Now())
}

// liveProxies reads the reports whose heartbeat is at most reportTTL old.
func liveProxies(cms []corev1.ConfigMap, now time.Time) []xdsserver.ProxyStatus {
	var out []xdsserver.ProxyStatus
	for _, cm := range cms {
		hb, err := time.Parse(time.RFC3339Nano, cm.Data[heartbeatKey])
		if err != nil || now.Sub(hb) > reportTTL {
			continue
		}
		keys := make([]string, 0, len(cm.Data))
		for k := range cm.Data {
			if strings.HasPrefix(k, proxiesKey+"-") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			var ps []xdsserver.ProxyStatus
			if json.Unmarshal([]byte(cm.Data[k]), &ps) == nil {
				out = append(out, ps...)
			}
		}
	}
	return out
}

// podIdentity is the Pod this replica runs in, from the downward API (POD_NAME, POD_NAMESPACE, POD_UID).
func podIdentity() (string, string, types.UID) {
	return os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"), types.UID(os.Getenv("POD_UID"))
}

// ownedByPod says whether the report can name this replica's Pod as its owner. An owner in another
// namespace than the report's reads to the garbage collector as one that is gone: it would delete the
// report as fast as it is written.
func (s *Source) ownedByPod() bool {
	return s.PodName != "" && s.PodUID != "" && s.PodNamespace == s.LeaderElectionNamespace
}
