package xdscache

import (
	"slices"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// A publish answers each stream's watches one after the other, in Types order, so that the server sends
// them together; watches of a type lbplane does not serve are never answered.
func TestByStreamGroupsWatchesPerStreamInTypeOrder(t *testing.T) {
	a, b := make(chan cachev3.DeltaResponse, 1), make(chan cachev3.DeltaResponse, 1)
	watch := func(ch chan cachev3.DeltaResponse, typ string) *deltaWatch {
		return &deltaWatch{ch: ch, typ: slices.Index(Types, typ)}
	}
	watches := map[int64]*deltaWatch{
		1: watch(a, resource.RouteType),
		2: watch(b, resource.ClusterType),
		3: watch(a, resource.ClusterType),
		4: watch(a, "type.googleapis.com/unknown"),
		5: watch(b, resource.EndpointType),
		6: watch(a, resource.ListenerType),
	}
	got := map[chan cachev3.DeltaResponse][]int64{}
	for _, sw := range byStream(watches, func(w *deltaWatch) (chan cachev3.DeltaResponse, int) { return w.ch, w.typ }) {
		var ids []int64
		var ch chan cachev3.DeltaResponse
		for _, id := range sw {
			if id == 0 {
				continue
			}
			if ch != nil && watches[id].ch != ch {
				t.Fatalf("one group holds watches of two streams: %v", sw)
			}
			ch = watches[id].ch
			ids = append(ids, id)
		}
		if _, dup := got[ch]; dup {
			t.Fatalf("a stream's watches are split over two groups")
		}
		got[ch] = ids
	}
	if want := []int64{3, 6, 1}; !slices.Equal(got[a], want) {
		t.Errorf("stream a: %v, want %v (cluster, listener, route; the unknown type left out)", got[a], want)
	}
	if want := []int64{2, 5}; !slices.Equal(got[b], want) {
		t.Errorf("stream b: %v, want %v", got[b], want)
	}
}
