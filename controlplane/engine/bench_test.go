package engine

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// The incremental report's CPU per change and memory per policy come from these benchmarks. To compare two
// commits, run the same command in a checkout of each, one after the other on an idle machine, and compare
// the two outputs with benchstat (golang.org/x/perf/cmd/benchstat):
//
//	go test -run '^$' -bench 'EngineOneChangeAmong|UpdateKubernetesOneChangeAmong|HeapPerPolicy' -benchmem -count 6 ./controlplane/engine > engine.txt
//	go test -run '^$' -bench ApplyOneChangeAmong -benchmem -count 6 ./controlplane/pushapi > push.txt
//	go test -run '^$' -bench DeltaResponseOneChangeAmong -benchmem -count 6 ./controlplane/xdscache > delta.txt
//
// ns/op of the OneChangeAmong rows is the CPU per change at each size; heapB/policy of HeapPerPolicy the
// memory per policy.

// benchPolicy is a policy on the shared port 8080 with its own hostname, as the push benchmark stores them.
func benchPolicy(i int, endpointPort int32) *v1alpha1.LoadBalancerPolicy {
	return &v1alpha1.LoadBalancerPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%05d", i), Namespace: "default",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, i, time.UTC))},
		Spec: v1alpha1.LoadBalancerPolicySpec{
			Listener: v1alpha1.Listener{Port: 8080, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("b-%05d.example.com", i)}},
			Backends: []v1alpha1.Backend{{Name: "a", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: endpointPort}}}},
		},
	}
}

// BenchmarkEngineOneChangeAmong measures one policy's change (its endpoint) with n policies held: translate,
// build, version and publish. The cost per change should not depend on n.
func BenchmarkEngineOneChangeAmong(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			policies := make([]*v1alpha1.LoadBalancerPolicy, n)
			for i := range policies {
				policies[i] = benchPolicy(i, 80)
			}
			e.Set(SourceStore, policies)
			b.ResetTimer()
			for i := range b.N {
				next := append([]*v1alpha1.LoadBalancerPolicy(nil), policies...)
				next[n/2] = benchPolicy(n/2, int32(81+i%2))
				e.Set(SourceStore, next)
			}
		})
	}
}

// BenchmarkHeapPerPolicy reports the live heap an engine holds per policy (translation cache, IR, built
// and marshalled resources, the published state) once n policies are published: what a policy costs in
// memory, with nothing kept twice.
func BenchmarkHeapPerPolicy(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			policies := make([]*v1alpha1.LoadBalancerPolicy, n)
			for i := range policies {
				policies[i] = benchPolicy(i, 80)
			}
			var perPolicy float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
				e.Set(SourceStore, policies)
				// A change, so that what a derived version keeps is counted too.
				next := slices.Clone(policies)
				next[n/2] = benchPolicy(n/2, 81)
				e.Set(SourceStore, next)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPolicy = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				runtime.KeepAlive(e)
			}
			b.ReportMetric(perPolicy, "heapB/policy")
		})
	}
}
