package xdscache

import (
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

type wildcardSub struct{ returned map[string]string }

func (s wildcardSub) ReturnedResources() map[string]string     { return s.returned }
func (s wildcardSub) SubscribedResources() map[string]struct{} { return nil }
func (s wildcardSub) IsWildcard() bool                         { return true }

// BenchmarkDeltaResponseOneChangeAmong measures what answering one wildcard delta stream costs after one
// cluster of n changed, the stream holding the state before: what bounded a change's CPU with an Envoy
// connected (see the incremental report). full compares every resource (a stream with no usable mark).
func BenchmarkDeltaResponseOneChangeAmong(b *testing.B) {
	for _, mode := range []string{"marked", "full"} {
		for _, n := range []int{10, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				var msgs []proto.Message
				for i := range n {
					msgs = append(msgs, &clusterv3.Cluster{Name: fmt.Sprintf("c-%05d", i)})
				}
				st, err := NewState(map[string][]proto.Message{resource.ClusterType: msgs})
				if err != nil {
					b.Fatal(err)
				}
				var links lineages
				links.add(st.sets[resource.ClusterType].link)
				known := map[string]string{}
				req := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: "1"}
				deltaResponse(st, &links, req, wildcardSub{returned: known})
				if mode == "full" {
					delete(known, markKey)
				}
				b.ResetTimer()
				for i := range b.N {
					r, _ := NewResource(resource.ClusterType, &clusterv3.Cluster{Name: fmt.Sprintf("c-%05d", n/2), AltStatName: fmt.Sprint(i)})
					next, _ := st.Derive(Change{Put: map[string][]*Resource{resource.ClusterType: {r}}})
					links.add(next.sets[resource.ClusterType].link)
					var resp cachev3.DeltaResponse = deltaResponse(next, &links, req, wildcardSub{returned: known})
					if resp == nil {
						b.Fatal("no response")
					}
					if mode == "full" {
						delete(known, markKey)
					}
					st = next
				}
			})
		}
	}
}
