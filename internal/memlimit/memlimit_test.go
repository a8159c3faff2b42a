package memlimit

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestContainerLimit(t *testing.T) {
	cases := map[string]struct {
		file, content string
		want          int64
		ok            bool
	}{
		"v2 limit":    {"memory.max", "1073741824\n", 1 << 30, true},
		"v2 no limit": {"memory.max", "max\n", 0, false},
		"v1 limit":    {"memory/memory.limit_in_bytes", "536870912\n", 1 << 29, true},
		"v1 no limit": {"memory/memory.limit_in_bytes", "9223372036854771712\n", 0, false},
		"garbage":     {"memory.max", "lots\n", 0, false},
		"no file":     {"", "", 0, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if c.file != "" {
				p := filepath.Join(root, c.file)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := Container(root)
			if got != c.want || ok != c.ok {
				t.Errorf("Container = %d, %v; want %d, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 128 * mib, 100},           // nothing live yet: Go's default
		{100 * mib, 128 * mib, 100},   // a small heap doubles, as Go paces it
		{512 * mib, 128 * mib, 25},    // 128 of 512 MiB
		{800 * mib, 128 * mib, 20},    // 16 % would be less than a fifth
		{4096 * mib, 128 * mib, 20},   // a huge heap keeps a fifth
		{1024 * mib, 1024 * mib, 100}, // headroom as large as the heap
	} {
		if got := percent(c.live, c.headroom); got != c.want {
			t.Errorf("percent(%d MiB live, %d MiB headroom) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

// Pace sets the runtime's GOGC after each collection: a live heap four times the headroom gets the least
// percent, and once that heap is garbage the default comes back.
func TestPaceFollowsTheLiveHeap(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Fatal("GOGC is set in the environment, and Pace leaves the collector alone then: unset it to run this test")
	}
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	// waitFor collects until the finalizer has set want (bounded: 200 collections).
	waitFor := func(want uint64) {
		t.Helper()
		for range 200 {
			runtime.GC()
			if gogc() == want {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("GOGC is %d after 200 collections, want %d", gogc(), want)
	}
	Pace(8<<20, slog.New(slog.DiscardHandler))
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20) // 64 MiB live, 8 times the headroom
	}
	waitFor(MinPercent)
	runtime.KeepAlive(live)
	live = nil
	waitFor(100)
}
