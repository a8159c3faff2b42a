package rollout

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/store"
)

// Version is one generation of a policy as a rollout keeps it: the typed policy its source handed over
// (spec and metadata, decoded once), stored in the rollout's state as the policy object it is, so that the
// state reads as a manifest. It is shared and never modified.
type Version v1alpha1.LoadBalancerPolicy

// VersionOf is p as a rollout keeps it (nil for nil); p is taken over and must not be modified.
func VersionOf(p *v1alpha1.LoadBalancerPolicy) *Version { return (*Version)(p) }

// Policy is the version's policy.
func (v *Version) Policy() *v1alpha1.LoadBalancerPolicy { return (*v1alpha1.LoadBalancerPolicy)(v) }

// storedVersion is a Version in the stored state. The policy's metadata keeps its creation time to the
// second, so created keeps it to the nanosecond: it decides conflicts between policies, and a baseline must
// be as old as the policy it was. Document and the record's fields are the form of earlier versions of
// lbplane, which kept the store's record (the document as pushed); they are read, not written.
type storedVersion struct {
	*v1alpha1.LoadBalancerPolicy
	Created time.Time `json:"created,omitzero"`

	Document   []byte `json:"document,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	UID        string `json:"uid,omitempty"`
}

func (v *Version) MarshalJSON() ([]byte, error) {
	p := *v.Policy()
	p.APIVersion, p.Kind = v1alpha1.GroupVersion.String(), v1alpha1.Kind
	return json.Marshal(storedVersion{LoadBalancerPolicy: &p, Created: p.CreationTimestamp.Time})
}

func (v *Version) UnmarshalJSON(b []byte) error {
	var s storedVersion
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s.LoadBalancerPolicy == nil || len(s.Document) > 0 {
		rec := &store.Record{Namespace: s.Namespace, Name: s.Name, Document: s.Document, Generation: s.Generation, Created: s.Created, UID: s.UID}
		p, err := rec.Policy()
		if err != nil {
			// Kept as the generation it was, with no spec: translation refuses it, as it refused the document.
			rec = rec.WithPolicy(&v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: s.Name}})
			p, _ = rec.Policy()
		}
		*v = Version(*p)
		return nil
	}
	if !s.Created.IsZero() {
		s.CreationTimestamp = metav1.NewTime(s.Created)
	}
	*v = Version(*s.LoadBalancerPolicy)
	return nil
}
