package store

import (
	"fmt"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
)

// decodedPolicy is a record's policy, decoded once (see Record.Policy).
type decodedPolicy struct {
	p atomic.Pointer[v1alpha1.LoadBalancerPolicy]
}

// Policy returns the policy the record holds, with its server-side metadata (namespace, generation,
// creation time, UID). The document is decoded once, by the first call, unless whoever made the record
// had the policy decoded already (WithPolicy): the push API, the engine, rollouts and undo all read the
// same policy. It is shared, so nothing may modify it (translation copies what it changes).
func (r *Record) Policy() (*v1alpha1.LoadBalancerPolicy, error) {
	if p := r.decoded.p.Load(); p != nil {
		return p, nil
	}
	d, err := manifest.DecodeDocument(r.Document)
	if err != nil {
		return nil, fmt.Errorf("stored policy %s no longer decodes: %w", r.Key(), err)
	}
	p := r.withMetadata(d.Policy)
	if !r.decoded.p.CompareAndSwap(nil, p) {
		return r.decoded.p.Load(), nil
	}
	return p, nil
}

// WithPolicy records that p, decoded from Document already, is the record's policy, and returns the record.
// p is taken over: it gets the record's metadata and nothing may modify it afterwards.
func (r *Record) WithPolicy(p *v1alpha1.LoadBalancerPolicy) *Record {
	r.decoded.p.Store(r.withMetadata(p))
	return r
}

func (r *Record) withMetadata(p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	p.Namespace = r.Namespace
	p.Generation = r.Generation
	p.CreationTimestamp = metav1.NewTime(r.Created)
	p.UID = types.UID(r.UID)
	return p
}
