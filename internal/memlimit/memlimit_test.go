package memlimit

import (
	"os"
	"path/filepath"
	"testing"
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
