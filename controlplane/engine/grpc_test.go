package engine

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// A group's gRPC profile is published once a gRPC client asks for it, follows every change of the group,
// and empties when the group goes; groups without gRPC clients get none.
func TestGRPCProfileFollowsTheGroup(t *testing.T) {
	cache := xdscache.New()
	e := New(cache, slog.New(slog.NewTextHandler(io.Discard, nil)))
	listeners := func() []string { return cache.Target(xdscache.GRPCKey("default")).Names(resource.ListenerType) }

	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{hosted("a", 8080, "a.example", 80)})
	if got := listeners(); len(got) != 0 {
		t.Fatalf("a profile built before any gRPC client: %v", got)
	}
	e.ServeGRPC("default")
	if got := listeners(); !slices.Equal(got, []string{"a.example:8080"}) {
		t.Fatalf("after the first gRPC client: %v", got)
	}
	e.Set(SourceStore, []*v1alpha1.LoadBalancerPolicy{hosted("a", 8080, "a.example", 80), hosted("b", 8080, "b.example", 81)})
	if got := listeners(); !slices.Equal(got, []string{"a.example:8080", "b.example:8080"}) {
		t.Fatalf("after a policy was added: %v", got)
	}
	if got := cache.Target(xdscache.GRPCKey("default")).Names(resource.ClusterType); len(got) != 2 {
		t.Fatalf("clusters: %v", got)
	}
	e.Set(SourceStore, nil)
	if got := listeners(); len(got) != 0 {
		t.Fatalf("after the group went: %v", got)
	}
}
