package engine

import (
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// An edit of one policy among 10,000 through the Kubernetes entry point makes the translator look at that
// policy only (not walk the list), leaves the list it replaced as it was, and publishes what SetKubernetes
// of the edited list gives. An added policy goes the whole way, and gives the same.
func TestUpdateKubernetesEditLooksAtTheEditedPolicyOnly(t *testing.T) {
	const n = 10000
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	list := make([]*v1alpha1.LoadBalancerPolicy, n)
	for i := range list {
		list[i] = benchPolicy(i, 80)
	}
	services, secrets := map[translate.ServiceRef]translate.ServiceEndpoints{}, map[translate.SecretRef]translate.TLSSecret{}
	e.SetKubernetes(list, services, secrets)
	held := e.sources[SourceKubernetes]
	before := slices.Clone(held)

	looks, translated := e.TranslatorListLooks(), e.Translations()
	edited := benchPolicy(n/2, 81)
	res := e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{edited}, nil, services, secrets, translate.ChangedRefs{})
	if d := e.TranslatorListLooks() - looks; d != 1 {
		t.Errorf("an edit of one policy among %d looked at %d policies of the list, want 1", n, d)
	}
	if d := e.Translations() - translated; d != 1 {
		t.Errorf("an edit of one policy translated %d", d)
	}
	if !slices.Equal(held, before) {
		t.Error("the list handed to the translator before the edit was modified")
	}
	want := slices.Clone(list)
	want[n/2] = edited
	full := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil))).SetKubernetes(want, services, secrets)
	if !reflect.DeepEqual(res.IR, full.IR) {
		t.Fatal("the IR after the edit differs from SetKubernetes of the edited list")
	}

	// A second edit on top of the first: the translator's list is the one the engine holds.
	looks = e.TranslatorListLooks()
	again := benchPolicy(n/2, 82)
	res = e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{again}, nil, services, secrets, translate.ChangedRefs{})
	if d := e.TranslatorListLooks() - looks; d != 1 {
		t.Errorf("a second edit looked at %d policies of the list, want 1", d)
	}
	want[n/2] = again
	if !reflect.DeepEqual(res.IR, New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil))).SetKubernetes(want, services, secrets).IR) {
		t.Fatal("the IR after the second edit differs from SetKubernetes of the edited list")
	}

	// An added policy: same result as the whole list.
	extra := benchPolicy(n, 80)
	res = e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{extra}, nil, services, secrets, translate.ChangedRefs{})
	want = append(want, extra)
	if !reflect.DeepEqual(res.IR, New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil))).SetKubernetes(want, services, secrets).IR) {
		t.Fatal("the IR after an added policy differs from SetKubernetes of the whole list")
	}
	// And an edit after it takes the short way again.
	looks = e.TranslatorListLooks()
	e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{benchPolicy(3, 83)}, nil, services, secrets, translate.ChangedRefs{})
	if d := e.TranslatorListLooks() - looks; d != 1 {
		t.Errorf("an edit after an addition looked at %d policies of the list, want 1", d)
	}
}
