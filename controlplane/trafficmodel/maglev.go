package trafficmodel

import (
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// maglev is the lookup table of Google's Maglev as Envoy builds it: hosts sorted by their hash key, each with
// an offset (xxHash64 seed 0 of the key, modulo the table size) and a skip (seed 1, modulo size-1, plus 1);
// in turns, each host takes the next free slot of its permutation, a host of lower weight skipping turns in
// proportion.
type maglev struct {
	table []int32
}

func newMaglev(hosts []weighted, size uint64) *maglev {
	m := &maglev{}
	if len(hosts) == 0 || size < 2 {
		return m
	}
	sorted := slices.Clone(hosts)
	slices.SortStableFunc(sorted, func(a, b weighted) int { return strings.Compare(a.key, b.key) })
	type entry struct {
		host                 int
		offset, skip, next   uint64
		weight, targetWeight float64
	}
	maxW := 0.0
	entries := make([]entry, len(sorted))
	for i, h := range sorted {
		maxW = max(maxW, h.weight)
		entries[i] = entry{host: h.host, offset: xxhash.Sum64String(h.key) % size,
			skip: xxhash64Seed(h.key, 1)%(size-1) + 1, weight: h.weight}
	}
	m.table = make([]int32, size)
	for i := range m.table {
		m.table[i] = -1
	}
	filled := uint64(0)
	for iteration := 1.0; filled < size; iteration++ {
		for i := 0; i < len(entries) && filled < size; i++ {
			e := &entries[i]
			if iteration*e.weight < e.targetWeight {
				continue
			}
			e.targetWeight += maxW
			c := (e.offset + e.skip*e.next) % size
			for m.table[c] >= 0 {
				e.next++
				c = (e.offset + e.skip*e.next) % size
			}
			m.table[c] = int32(e.host)
			e.next++
			filled++
		}
	}
	return m
}

func (m *maglev) owner(h uint64) int {
	if len(m.table) == 0 {
		return -1
	}
	return int(m.table[h%uint64(len(m.table))])
}

func (m *maglev) shares(n int) []float64 {
	out := make([]float64, n)
	if len(m.table) == 0 {
		return out
	}
	for _, h := range m.table {
		out[h]++
	}
	for i := range out {
		out[i] /= float64(len(m.table))
	}
	return out
}
