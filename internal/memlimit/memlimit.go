// Package memlimit gives the Go runtime a soft memory limit derived from the container's, when the process
// runs under one, and paces its collector so that a large live heap is not doubled before each collection
// (headroom.go).
//
// Without it the heap may grow to twice what is live before a collection (GOGC=100): with 100,000 policies
// (≈ 0.7 GB live) that is more than a 1 GiB container allows, and the kernel kills lbplane where a
// collection would have been enough. With it, the collector works harder as the heap nears the limit. It
// does not make lbplane smaller when it runs without a limit, and it cannot save a process whose live heap
// is over the limit.
package memlimit

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// share is the part of the container's limit given to the Go heap; the rest is for what the runtime does
// not count: the store's memory-mapped file, goroutine stacks outside the heap, Envoy's bootstrap files.
const share = 0.85

// Apply sets the limit unless GOMEMLIMIT says otherwise, and says what it did.
func Apply(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit, ok := Container("/sys/fs/cgroup")
	if !ok {
		return
	}
	goLimit := int64(float64(limit) * share)
	debug.SetMemoryLimit(goLimit)
	log.Info("Go memory limit set from the container's (GOMEMLIMIT overrides)", "container_bytes", limit, "go_bytes", goLimit)
}

// Container reads the memory limit of the process's cgroup under root (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes); false when there is none.
func Container(root string) (int64, bool) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		return parse(string(b))
	}
	return 0, false
}

// parse reads a limit file: "max" (v2) or a huge page-rounded number (v1) means no limit.
func parse(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false
	}
	return n, true
}
