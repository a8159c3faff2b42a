package translate

import (
	"reflect"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/reach"
)

// Clusters share defaultOutlier only when theirs equals it in every field: a field sameOutlier did not
// compare would let a cluster with another ejection setting be served the default one.
func TestSameOutlierComparesEveryField(t *testing.T) {
	if same := *defaultOutlier; !sameOutlier(&same, defaultOutlier) {
		t.Fatal("a copy of the default ejection does not compare equal to it")
	}
	typ := reflect.TypeOf(ir.Outlier{})
	for i := range typ.NumField() {
		o := *defaultOutlier
		f := reflect.ValueOf(&o).Elem().Field(i)
		switch f.Kind() {
		case reflect.Pointer:
			n := reflect.New(f.Type().Elem())
			if !f.IsNil() {
				n.Elem().Set(f.Elem())
			}
			// A non-zero value the default has not: the first field of the pointed-to value moved by one.
			e := n.Elem()
			if e.Kind() == reflect.Struct {
				e = e.Field(0)
			}
			e.SetUint(e.Uint() + 1)
			f.Set(n)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint32:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s: kind %s not covered by this test", typ.Field(i).Name, f.Kind())
		}
		if sameOutlier(&o, defaultOutlier) {
			t.Errorf("field %s: sameOutlier ignores it", typ.Field(i).Name)
		}
	}
}

// A backend without healthCheck.passive gets the shared default ejection; one with backups does not (its
// cap differs), and neither does one that sets its own.
func TestDefaultOutlierShared(t *testing.T) {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name, p.Namespace, p.APIVersion, p.Kind = "p", "default", v1alpha1.APIVersion, v1alpha1.Kind
	p.Spec.Listener = v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}}},
		{Name: "b", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}, {Address: "10.0.0.2", Port: 80},
			{Address: "10.0.0.3", Port: 80}, {Address: "10.0.0.4", Port: 80, Backup: true}}}}
	c, errs := Prepare(p, reach.Rules{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := cluster(c, &c.Spec.Backends[0], Refs{}).Outlier; got != defaultOutlier {
		t.Errorf("backend a: outlier %+v is not the shared default", got)
	}
	if got := cluster(c, &c.Spec.Backends[1], Refs{}).Outlier; got == defaultOutlier || got.MaxEjectionPercent == defaultOutlier.MaxEjectionPercent {
		t.Errorf("backend b (3 primaries, a backup: cap 75 percent): outlier %+v, want its own cap", got)
	}
}
