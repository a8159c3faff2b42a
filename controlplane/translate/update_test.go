package translate

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// TranslateUpdate of one edited, one added and one deleted policy among 10,000 looks at those three, and
// gives what a translation from scratch of the patched list gives. Given a list that is not the previous
// call's, it diffs the whole list: the counter sees the difference.
func TestTranslateUpdateLooksAtTheChangedPoliciesOnly(t *testing.T) {
	const n = 10000
	pol := func(i int, port int32) *v1alpha1.LoadBalancerPolicy {
		name := fmt.Sprintf("p%05d", i)
		return &v1alpha1.LoadBalancerPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{name + ".example.com"}},
				Backends: []v1alpha1.Backend{{Name: "web", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: port}}}}}}
	}
	set := make([]*v1alpha1.LoadBalancerPolicy, 0, n)
	for i := range n {
		set = append(set, pol(i, 80))
	}
	tr := NewTranslator()
	tr.Translate(set, Refs{})
	edited, added := pol(42, 81), pol(n, 80)
	next := append(slices.Clone(set[1:]), added) // p00000 deleted
	next[41] = edited
	looks, runs := tr.ListLooks(), tr.Runs()
	res := tr.TranslateUpdate(set, next, []*v1alpha1.LoadBalancerPolicy{edited, added}, []objkey.Key{objkey.Of(set[0])}, Refs{}, ChangedRefs{})
	if d := tr.ListLooks() - looks; d != 3 {
		t.Errorf("an update of 3 policies among %d looked at %d, want 3", n, d)
	}
	if d := tr.Runs() - runs; d != 2 {
		t.Errorf("an update of 3 policies (one deleted) translated %d, want 2", d)
	}
	if !reflect.DeepEqual(res.IR, translateAll(next, Refs{}).IR) {
		t.Fatal("IR differs from a translation from scratch")
	}
	if res.Policies.Of(objkey.Of(set[0])) != nil || res.Policies.Len() != n {
		t.Fatalf("%d results, the deleted policy's present: %v", res.Policies.Len(), res.Policies.Of(objkey.Of(set[0])) != nil)
	}

	// Not the previous call's list: the whole list is diffed, with the same result.
	other := NewTranslator()
	other.Translate(set, Refs{})
	looks = other.ListLooks()
	res = other.TranslateUpdate(slices.Clone(set), next, []*v1alpha1.LoadBalancerPolicy{edited, added}, []objkey.Key{objkey.Of(set[0])}, Refs{}, ChangedRefs{})
	if d := other.ListLooks() - looks; d < n {
		t.Errorf("an update relative to another list looked at %d policies, want the whole list (%d)", d, n)
	}
	if !reflect.DeepEqual(res.IR, translateAll(next, Refs{}).IR) {
		t.Fatal("IR differs from a translation from scratch after the fallback")
	}
}
