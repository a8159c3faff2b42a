package xdscache

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// st builds a state with the given clusters and one listener whose content is route (it stands for "what
// the routes point at").
func st(t *testing.T, route string, clusters ...string) *State {
	t.Helper()
	res := map[string][]proto.Message{}
	for _, c := range clusters {
		res[resource.ClusterType] = append(res[resource.ClusterType], &clusterv3.Cluster{Name: c})
	}
	res[resource.ListenerType] = []proto.Message{&listenerv3.Listener{Name: "l", StatPrefix: route, Freebind: wrapperspb.Bool(true)}}
	s, err := NewState(res)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func describe(s *State) string {
	out := ""
	for _, n := range s.Names(resource.ClusterType) {
		out += n + " "
	}
	return out + "-> " + must(s.sets[resource.ListenerType].get("l")).message().(*listenerv3.Listener).StatPrefix
}

func TestPlanMakesBeforeItBreaks(t *testing.T) {
	cases := map[string]struct {
		old, next *State
		want      []string
	}{
		"swap a cluster":                 {st(t, "a", "a"), st(t, "b", "b"), []string{"a b -> a", "a b -> b", "b -> b"}},
		"add a cluster, route unchanged": {st(t, "a", "a"), st(t, "a", "a", "b"), []string{"a b -> a"}},
		"remove a cluster":               {st(t, "a+b", "a", "b"), st(t, "a", "a"), []string{"a b -> a", "a -> a"}},
		"route change only":              {st(t, "x", "a"), st(t, "y", "a"), []string{"a -> y"}},
		"nothing changes":                {st(t, "x", "a"), st(t, "x", "a"), []string{"a -> x"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			steps := plan(tc.old, tc.next)
			var got []string
			for _, s := range steps {
				got = append(got, describe(s))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("steps %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("step %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
			if steps[len(steps)-1].Version != tc.next.Version {
				t.Error("the last step is not the target")
			}
		})
	}
}

func TestVersionsComeFromContent(t *testing.T) {
	a, b := st(t, "x", "a", "b"), st(t, "x", "b", "a")
	if a.Version != b.Version {
		t.Error("the same resources in another order got another version")
	}
	if c := st(t, "y", "a", "b"); c.Version == a.Version {
		t.Error("different resources got the same version")
	}
}

func TestStateBytesIsTheSerializedSize(t *testing.T) {
	s := st(t, "r", "a", "b")
	want := 0
	for _, typ := range Types {
		for _, m := range s.Resources(typ) {
			want += proto.Size(m)
		}
	}
	if want == 0 || s.Bytes != want {
		t.Errorf("Bytes %d, want %d", s.Bytes, want)
	}
}

func must(e *entry, ok bool) *entry {
	if !ok {
		panic("missing")
	}
	return e
}
