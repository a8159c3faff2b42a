package kubesource_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// On a real API server: a replica in a Pod reports its Envoys in a ConfigMap owned by that Pod (so that the
// garbage collector, which this bare API server does not run, removes it with the Pod); the status writer
// counts another replica's fresh report and ignores a stale one; a clean shutdown deletes the report.
func TestProxyReportOwnedByPodAndStaleReportsIgnored(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "default"
	// No controller creates the default ServiceAccount here, and Pod admission wants it.
	if err := c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lbplane-7d9f-abcde", Namespace: ns},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "lbplane", Image: "lbplane"}}}}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	report := func(name, node string, at time.Time) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"lbplane.io/proxy-report": "true"}},
			Data: map[string]string{"heartbeat": at.UTC().Format(time.RFC3339Nano), "proxies-0": `[{"nodeId":"` + node + `","group":"default"}]`}}
	}
	stale := report("lbplane-proxies-gone", "envoy-of-a-dead-replica", time.Now().Add(-time.Hour))
	if err := c.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	src := &kubesource.Source{Config: c.Config, Engine: engine.New(cache, log), Tracker: xdsserver.NewTracker(cache, log), Log: log,
		LeaderElectionNamespace: ns, PodName: pod.Name, PodNamespace: ns, PodUID: pod.UID}
	if err := src.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()

	own := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "lbplane-proxies-" + pod.Name}
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = c.Client.Get(ctx, key, own); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("this replica's report %s: %v", key, err)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	if !slices.EqualFunc(own.OwnerReferences, want, func(a, b metav1.OwnerReference) bool {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID
	}) {
		t.Errorf("owner references of the report: %+v, want %+v", own.OwnerReferences, want)
	}
	if own.Labels["lbplane.io/proxy-report"] != "true" || own.Data["heartbeat"] == "" {
		t.Errorf("report: labels %v, data %v", own.Labels, own.Data)
	}

	// Another replica's report, fresh when read.
	if err := c.Client.Create(ctx, report("lbplane-proxies-other", "envoy-of-a-live-replica", time.Now())); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, p := range src.AllProxies(ctx) {
		nodes = append(nodes, p.NodeID)
	}
	if !slices.Equal(nodes, []string{"envoy-of-a-live-replica"}) {
		t.Errorf("proxies read from the reports: %v, want only the live replica's Envoy", nodes)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the source did not stop")
	}
	if err := c.Client.Get(context.Background(), key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("after a clean shutdown, this replica's report: %v, want not found", err)
	}
}
