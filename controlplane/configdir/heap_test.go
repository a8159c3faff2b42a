package configdir

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// writeFillers writes n policies in files of 1,000, as the cold-start row of bench/runner does: each its own
// hostname on one shared port, one endpoint.
func writeFillers(tb testing.TB, dir string, n int) {
	tb.Helper()
	for from := 0; from < n; from += 1000 {
		var b strings.Builder
		for i := from; i < min(n, from+1000); i++ {
			fmt.Fprintf(&b, "---\napiVersion: lbplane.io/v1alpha1\nkind: LoadBalancerPolicy\nmetadata: {name: c-%d}\nspec:\n"+
				"  listener: {address: 127.0.0.1, port: 29331, protocol: HTTP, hostnames: [c-%d.bench.local]}\n"+
				"  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 29391}]}]\n", i, i)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("p-%06d.yaml", from)), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

var heapProfile = flag.String("heapprofile", "", "BenchmarkLoadHeapPerPolicy writes the heap profile of the loaded watcher here")

// BenchmarkLoadHeapPerPolicy reports the live heap a config-dir lbplane holds per policy once a directory of
// n policies is loaded and published: the watcher's decoded documents, the engine's translation cache, IR,
// built and marshalled resources. It is the cold-start row's memory without the process around it.
func BenchmarkLoadHeapPerPolicy(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			writeFillers(b, dir, n)
			if *heapProfile != "" {
				// Every allocation of a few hundred bytes sampled: the profile shows what each policy keeps.
				runtime.MemProfileRate = 256
			}
			var perPolicy float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				l := slog.New(slog.NewTextHandler(io.Discard, nil))
				e := engine.New(xdscache.New(), l)
				e.Reach = reach.Loopback
				w := &Watcher{Dir: dir, Engine: e, Log: l}
				if err := w.Load(); err != nil {
					b.Fatal(err)
				}
				if errs := w.Errors(); len(errs) > 0 {
					b.Fatal(errs)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPolicy = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				if *heapProfile != "" {
					f, err := os.Create(fmt.Sprintf("%s.%d", *heapProfile, n))
					if err != nil {
						b.Fatal(err)
					}
					if err := pprof.WriteHeapProfile(f); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				runtime.KeepAlive(w)
			}
			b.ReportMetric(perPolicy, "heapB/policy")
		})
	}
}
