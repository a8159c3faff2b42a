package kubesource

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Reasons of the Kubernetes Events lbplane records on a policy.
const (
	EventReasonEjected   = "EndpointEjected"
	EventReasonRecovered = "EndpointRecovered"
	EventReasonUnknown   = "EndpointHealthUnknown"
)

// eventCorrelation bounds the Events per policy: client-go's spam filter lets a burst of 20 through, then one
// every 30 s per policy, and aggregates similar ones (a flapping endpoint becomes one Event with a count).
var eventCorrelation = record.CorrelatorOptions{BurstSize: 20, QPS: 1.0 / 30}

// startEvents makes the Event recorder, before the manager runs; the broadcaster stops with the manager
// (see Start).
func (s *Source) startEvents() (record.EventBroadcaster, error) {
	client, err := corev1client.NewForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(eventCorrelation))
	b.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: client.Events("")})
	s.recorder = b.NewRecorder(Scheme(), corev1.EventSource{Component: "lbplane"})
	return b, nil
}

// HealthEvent records an ejection, recovery or lapsed passive ejection as a Kubernetes Event on the policy,
// from the replica that writes status only (every replica reads every Envoy: the others would repeat it).
func (s *Source) HealthEvent(e apiwire.HealthEvent) {
	if s.recorder == nil {
		return
	}
	select {
	case <-s.mgr.Elected():
	default:
		return
	}
	p := &v1alpha1.LoadBalancerPolicy{}
	if err := s.mgr.GetCache().Get(context.Background(), types.NamespacedName{Namespace: e.Namespace, Name: e.Policy}, p); err != nil {
		return
	}
	typ, reason, what := corev1.EventTypeWarning, EventReasonEjected, "ejected"
	switch e.Type {
	case apiwire.EventRecovered:
		typ, reason, what = corev1.EventTypeNormal, EventReasonRecovered, "recovered"
	case apiwire.EventUnknown:
		reason, what = EventReasonUnknown, "unknown"
	}
	msg := "endpoint " + e.Endpoint + " of backend " + e.Backend + " " + what + " on Envoy " + e.Node
	if len(e.Reasons) > 0 {
		msg += ": " + strings.Join(e.Reasons, "; ")
	}
	s.recorder.Event(p, typ, reason, msg)
}
