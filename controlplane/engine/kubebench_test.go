package engine

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// BenchmarkUpdateKubernetesOneChangeAmong measures one policy's change through the Kubernetes source's entry
// point with n policies held. The cost per change should not depend on n.
func BenchmarkUpdateKubernetesOneChangeAmong(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			policies := make([]*v1alpha1.LoadBalancerPolicy, n)
			for i := range policies {
				policies[i] = benchPolicy(i, 80)
			}
			services, secrets := map[translate.ServiceRef]translate.ServiceEndpoints{}, map[translate.SecretRef]translate.TLSSecret{}
			e.SetKubernetes(policies, services, secrets)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{benchPolicy(n/2, int32(81+i%2))}, nil, services, secrets, translate.ChangedRefs{})
			}
		})
	}
}
