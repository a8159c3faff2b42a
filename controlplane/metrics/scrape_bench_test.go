package metrics

import (
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkScrape100000Policies serves one /metrics scrape with 100,000 policies of four conditions each,
// and reports the heap's peak above what was live before it (heap in use, sampled every millisecond
// while the scrape runs) beside the bytes allocated. The answer is not compressed.
//
//	go test -run '^$' -bench BenchmarkScrape100000Policies -benchmem ./controlplane/metrics
func BenchmarkScrape100000Policies(b *testing.B) {
	list := make([]PolicyConditions, 100000)
	for i := range list {
		list[i].Policy = types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("filler-%06d", i)}
		for _, c := range []string{"Accepted", "ResolvedRefs", "Programmed", "RolledBack"} {
			list[i].Conditions = append(list[i].Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: c})
		}
	}
	m := New(nil)
	m.Policies(func() iter.Seq[PolicyConditions] { return slices.Values(list) })
	benchmarkScrape(b, m.Handler())
}

// BenchmarkScrape100000Clusters serves one /metrics scrape with 100,000 clusters (lbplane_cluster_info), as
// BenchmarkScrape100000Policies does.
//
//	go test -run '^$' -bench BenchmarkScrape100000Clusters -benchmem ./controlplane/metrics
func BenchmarkScrape100000Clusters(b *testing.B) {
	list := make([]ClusterInfo, 100000)
	for i := range list {
		name := fmt.Sprintf("filler-%06d", i)
		list[i] = ClusterInfo{Cluster: "default/" + name + "/app", Namespace: "default", Name: name, Backend: "app"}
	}
	m := New(nil)
	m.Clusters(func() iter.Seq[ClusterInfo] { return slices.Values(list) })
	benchmarkScrape(b, m.Handler())
}

// benchmarkScrape scrapes h once per round into a 64 MiB buffer made before (as a scraper's socket would
// take the answer), and reports the heap's peak above what was live before the scrape.
func benchmarkScrape(b *testing.B, h http.Handler) {
	peak := 0.0
	for b.Loop() {
		rec := httptest.NewRecorder()
		rec.Body.Grow(64 << 20)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var top atomic.Uint64
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				var s runtime.MemStats
				runtime.ReadMemStats(&s)
				if s.HeapInuse > top.Load() {
					top.Store(s.HeapInuse)
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		close(done)
		<-sampled
		if rec.Code != 200 {
			b.Fatalf("scrape: %d", rec.Code)
		}
		peak = max(peak, float64(top.Load()-min(top.Load(), base))/(1<<20))
	}
	b.ReportMetric(peak, "peak-heap-MiB")
}
