package proxystats

import (
	"fmt"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// state serves n clusters of eps endpoints each; cluster 0's connect timeout is timeout seconds.
func state(t *testing.T, n, eps int, timeout int64) *xdscache.State {
	t.Helper()
	var clusters, clas []proto.Message
	for i := range n {
		name := fmt.Sprintf("ns/p%d/app", i)
		c := &clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second)}
		if i == 0 {
			c.ConnectTimeout = durationpb.New(time.Duration(timeout) * time.Second)
		}
		clusters = append(clusters, c)
		cla := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
		for j := range eps {
			cla.Endpoints[0].LbEndpoints = append(cla.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
					Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1",
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(1000 + j)}}}}}}})
		}
		clas = append(clas, cla)
	}
	s, err := xdscache.NewState(map[string][]proto.Message{resource.ClusterType: clusters, resource.EndpointType: clas})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What an Envoy may answer grows with what lbplane serves it, never below maxBody.
func TestBodyLimitFollowsWhatIsServed(t *testing.T) {
	var s *xdscache.State
	p := &Poller{Clusters: func(string) *xdscache.State { return s }}
	if got := p.bodyLimit("g"); got != maxBody {
		t.Errorf("no state: %d", got)
	}
	s = state(t, 10, 1, 1)
	if got := p.bodyLimit("g"); got != maxBody {
		t.Errorf("10 clusters: %d, want %d", got, maxBody)
	}
	s = state(t, 2000, 2, 1)
	if got, want := p.bodyLimit("g"), (2000+4000)*bodyPerResource; got != want {
		t.Errorf("2000 clusters of 2 endpoints: %d, want %d", got, want)
	}
}

// A changed cluster is named from the state that changed it; an unchanged one is not.
func TestChangedClustersFromTheStates(t *testing.T) {
	s := state(t, 3, 1, 1)
	p := &Poller{Window: time.Minute, Clusters: func(string) *xdscache.State { return s }}
	t0 := time.Now()
	p.noteChanges("g", t0)
	if got := p.changedSince("g", t0.Add(-time.Hour)); len(got) != 0 {
		t.Errorf("the first state seen: %v changed", got)
	}
	s = state(t, 4, 1, 2) // p0's timeout changed, p3 added
	p.noteChanges("g", t0.Add(time.Second))
	got := p.changedSince("g", t0)
	slices.Sort(got)
	if !slices.Equal(got, []string{"ns/p0/app", "ns/p3/app"}) {
		t.Errorf("changed: %v", got)
	}
	if got := p.changedSince("g", t0.Add(2*time.Second)); len(got) != 0 {
		t.Errorf("changed since after the change: %v", got)
	}
	p.noteChanges("g", t0.Add(2*time.Minute)) // same state: nothing new; a window later, forgotten
	s = state(t, 4, 1, 2)
	p.noteChanges("g", t0.Add(3*time.Minute))
	if got := p.changedSince("g", t0); len(got) != 0 {
		t.Errorf("after a window with the same resources: %v", got)
	}
}
