package kubesource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestStatusOnlyTellsStatusWritesFromChanges(t *testing.T) {
	base := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3, Annotations: map[string]string{"a": "1"}}}
	status := base.DeepCopy()
	status.Status.ObservedGeneration = 3
	spec := base.DeepCopy()
	spec.Generation = 4
	annotated := base.DeepCopy()
	annotated.Annotations["lbplane.io/expected-concurrency"] = "100"
	labelled := base.DeepCopy()
	labelled.Labels = map[string]string{"team": "x"}
	deleting := base.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, c := range []struct {
		name     string
		old, cur any
		want     bool
	}{
		{"status written", base, status, true},
		{"spec changed", base, spec, false},
		{"annotation added", base, annotated, false},
		{"label added", base, labelled, false},
		{"deletion started", base, deleting, false},
		{"not a policy", &corev1.Service{}, &corev1.Service{}, false},
	} {
		if got := statusOnly(c.old, c.cur); got != c.want {
			t.Errorf("%s: statusOnly = %v, want %v", c.name, got, c.want)
		}
	}
}
