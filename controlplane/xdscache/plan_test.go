package xdscache

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
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

// Changed names what differs between two states, from the lineage when one derives from the other and by
// comparing every name when they are unrelated, with the same answer.
func TestChangedNamesWhatDiffers(t *testing.T) {
	s0 := st(t, "r", "a", "b", "c")
	put := func(name string, timeout int64) *Resource {
		r, err := NewResource(resource.ClusterType, &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Duration(timeout) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s1, err := s0.Derive(Change{Put: map[string][]*Resource{resource.ClusterType: {put("b", 2), put("d", 1)}}, Remove: map[string][]string{resource.ClusterType: {"c"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The same content as s1, built afresh: no lineage in common with s0.
	fresh, err := NewState(map[string][]proto.Message{resource.ClusterType: {&clusterv3.Cluster{Name: "a"},
		&clusterv3.Cluster{Name: "b", ConnectTimeout: durationpb.New(2 * time.Second)}, &clusterv3.Cluster{Name: "d", ConnectTimeout: durationpb.New(time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		prev, next *State
		want       []string
	}{
		{"derived", s0, s1, []string{"b", "c", "d"}},
		{"back", s1, s0, []string{"b", "c", "d"}},
		{"unrelated", s0, fresh, []string{"b", "c", "d"}},
		{"same content, unrelated", s1, fresh, nil},
		{"itself", s1, s1, nil},
		{"a type neither has", s0, s1, nil},
	} {
		typ := resource.ClusterType
		if c.name == "a type neither has" {
			typ = resource.RouteType
		}
		got := Changed(c.prev, c.next, typ)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
