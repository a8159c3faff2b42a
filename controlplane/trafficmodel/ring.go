package trafficmodel

import (
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// Envoy's defaults for ring hash and Maglev.
const (
	DefaultMinRingSize     = 1024
	DefaultMaxRingSize     = 8 * 1024 * 1024
	DefaultMaglevTableSize = 65537
)

// weighted is a host with its weight normalised over the set the hashing load balancer is built from.
type weighted struct {
	host   int // index into the level's hosts
	key    string
	weight float64
}

// hasher maps a hash to a host index.
type hasher interface {
	owner(h uint64) int
	// shares is the fraction of the hash space each of n hosts owns.
	shares(n int) []float64
}

type ringEntry struct {
	hash uint64
	host int
}

// ring is Envoy's ketama-style ring: each host gets hashes of "address:port_0", "address:port_1", ... in
// proportion to its weight, scaled so that the lightest host gets a whole number of entries at least the
// minimum ring size times its weight, capped at the maximum ring size.
type ring struct{ entries []ringEntry }

func newRing(hosts []weighted, minSize, maxSize uint64) *ring {
	r := &ring{}
	if len(hosts) == 0 {
		return r
	}
	minW := 1.0
	for _, h := range hosts {
		minW = min(minW, h.weight)
	}
	scale := min(math.Ceil(minW*float64(minSize))/minW, float64(maxSize))
	r.entries = make([]ringEntry, 0, int(math.Ceil(scale)))
	// Running sums keep fractional shares stable, as Envoy does: a host gets entries while the running
	// count is below the running target.
	current, target := 0.0, 0.0
	for _, h := range hosts {
		target += scale * h.weight
		buf := []byte(h.key + "_")
		for i := 0; current < target; i++ {
			k := strconv.AppendInt(buf, int64(i), 10)
			r.entries = append(r.entries, ringEntry{hash: xxhash.Sum64(k), host: h.host})
			current++
		}
	}
	slices.SortStableFunc(r.entries, func(a, b ringEntry) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	return r
}

// owner is the first entry whose hash is at or above h, wrapping to the first.
func (r *ring) owner(h uint64) int {
	if len(r.entries) == 0 {
		return -1
	}
	i, _ := slices.BinarySearchFunc(r.entries, h, func(e ringEntry, h uint64) int {
		switch {
		case e.hash < h:
			return -1
		case e.hash > h:
			return 1
		}
		return 0
	})
	if i == len(r.entries) {
		i = 0
	}
	return r.entries[i].host
}

// shares returns the fraction of the 64-bit hash space each host owns.
func (r *ring) shares(n int) []float64 {
	out := make([]float64, n)
	if len(r.entries) == 0 {
		return out
	}
	const space = float64(math.MaxUint64)
	prev := r.entries[len(r.entries)-1].hash
	for i, e := range r.entries {
		var arc float64
		if i == 0 {
			// From past the last entry, around zero, to the first.
			arc = (space - float64(prev)) + float64(e.hash)
		} else {
			arc = float64(e.hash - prev)
		}
		out[e.host] += arc / space
		prev = e.hash
	}
	return out
}
