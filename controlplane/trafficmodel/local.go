package trafficmodel

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// Local is where one Envoy runs, as its bootstrap gives it: the zone of its node (node.locality) and its
// local cluster (cluster_manager.local_cluster_name), whose hosts per zone stand for where the fleet's
// Envoys run. Envoy's zone-aware routing weighs the upstream zones against the local cluster's, and does
// nothing without one. Localities are compared by zone: lbplane sets no region or sub-zone.
type Local struct {
	// Zone is node.locality.zone.
	Zone string
	// Cluster is the local cluster's name; empty when the bootstrap names none.
	Cluster string
	// Hosts and Weights are the local cluster's hosts per zone, and the sum of their weights. A static
	// cluster without health checks: every host is healthy.
	Hosts   map[string]int
	Weights map[string]uint64
}

// LocalFromBootstrap reads an Envoy's place from its bootstrap (YAML or JSON, as Envoy's -c takes it):
// the node's zone, and the hosts of the static cluster cluster_manager.local_cluster_name names.
func LocalFromBootstrap(doc []byte) (*Local, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	var b struct {
		Node struct {
			Locality struct {
				Zone string `json:"zone"`
			} `json:"locality"`
		} `json:"node"`
		ClusterManager struct {
			LocalClusterName string `json:"local_cluster_name"`
			LocalClusterCC   string `json:"localClusterName"`
		} `json:"cluster_manager"`
		StaticResources struct {
			Clusters []json.RawMessage `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := json.Unmarshal(js, &b); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	l := &Local{Zone: b.Node.Locality.Zone, Cluster: b.ClusterManager.LocalClusterName}
	if l.Cluster == "" {
		l.Cluster = b.ClusterManager.LocalClusterCC
	}
	if l.Cluster == "" {
		return l, nil
	}
	for _, raw := range b.StaticResources.Clusters {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) != nil || named.Name != l.Cluster {
			continue
		}
		var c clusterv3.Cluster
		if err := protojson.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("bootstrap: local cluster %s: %w", l.Cluster, err)
		}
		l.Hosts, l.Weights = map[string]int{}, map[string]uint64{}
		for _, loc := range c.GetLoadAssignment().GetEndpoints() {
			z := loc.GetLocality().GetZone()
			for _, e := range loc.GetLbEndpoints() {
				l.Hosts[z]++
				l.Weights[z] += uint64(max(1, e.GetLoadBalancingWeight().GetValue()))
			}
		}
		return l, nil
	}
	return nil, fmt.Errorf("bootstrap: cluster_manager.local_cluster_name names %s, which is not a static cluster", l.Cluster)
}

var localsMu sync.Mutex
var locals = map[string]*Local{}

// LocalForZone is an Envoy in zone as lbplane bootstraps it (lbctl bootstrap --zone, the chart's
// envoy.zone), read from the bootstrap lbplane renders for it; nil for an Envoy without a zone.
func LocalForZone(zone string) (*Local, error) {
	if zone == "" {
		return nil, nil
	}
	localsMu.Lock()
	defer localsMu.Unlock()
	if l, ok := locals[zone]; ok {
		return l, nil
	}
	// Only the cluster manager's local cluster is read: the admin socket is a placeholder no Envoy opens.
	doc, err := envoybootstrap.Render(envoybootstrap.Params{NodeID: "trafficmodel", XDS: "127.0.0.1:1", Zone: zone, MaxConnections: 1, AdminSocket: "/nonexistent/admin.sock"})
	if err != nil {
		return nil, err
	}
	l, err := LocalFromBootstrap(doc)
	if err != nil {
		return nil, err
	}
	if len(locals) < maxLocals {
		locals[zone] = l
	}
	return l, nil
}

// maxLocals bounds the zones whose bootstrap is kept: a zone name comes from Envoys and users.
const maxLocals = 256

// EnvoyPart is some of the Envoys a prediction is for: those of one zone ("" for Envoys without one), how
// many they are, and their part of the requests.
type EnvoyPart struct {
	Zone   string  `json:"zone"`
	Envoys int     `json:"envoys"`
	Part   float64 `json:"part"`
	local  *Local
}

// Envoys are the Envoys a prediction is for. The shares of a cluster whose balancing depends on the
// Envoy's zone are the parts' shares, weighed by their parts. Empty: one Envoy without a zone.
type Envoys []EnvoyPart

// EnvoysIn is one Envoy in zone ("" for one without a zone), bootstrapped by lbplane; an error for a zone
// lbctl bootstrap refuses.
func EnvoysIn(zone string) (Envoys, error) {
	if _, err := LocalForZone(zone); err != nil {
		return nil, err
	}
	return EnvoysByZone(map[string]int{zone: 1}), nil
}

// EnvoysByZone are the Envoys counted by zone, each taken to send as many requests as another, each
// bootstrapped by lbplane (LocalForZone). Zones with no Envoy are left out. An Envoy whose zone lbctl
// bootstrap would refuse was not bootstrapped by lbplane: it is taken to have no local cluster.
func EnvoysByZone(count map[string]int) Envoys {
	total := 0
	for _, n := range count {
		total += max(n, 0)
	}
	var out Envoys
	for _, z := range slices.Sorted(maps.Keys(count)) {
		if count[z] <= 0 {
			continue
		}
		l, err := LocalForZone(z)
		if err != nil {
			l = &Local{Zone: z}
		}
		out = append(out, EnvoyPart{Zone: z, Envoys: count[z], Part: float64(count[z]) / float64(total), local: l})
	}
	return out
}

// EnvoysFrom is one Envoy bootstrapped as l says (LocalFromBootstrap).
func EnvoysFrom(l *Local) Envoys {
	zone := ""
	if l != nil {
		zone = l.Zone
	}
	return Envoys{{Zone: zone, Envoys: 1, Part: 1, local: l}}
}

// parts are the Envoys to weigh: one without a zone when there are none.
func (e Envoys) parts() Envoys {
	if len(e) == 0 {
		return Envoys{{Envoys: 1, Part: 1}}
	}
	return e
}

// String names the Envoys: "an Envoy in zone-a", "Envoys in zone-a (2) and zone-b (1)".
func (e Envoys) String() string {
	ps := e.parts()
	name := func(z string) string {
		if z == "" {
			return "no zone"
		}
		return z
	}
	if len(ps) == 1 {
		switch {
		case ps[0].Envoys == 1 && ps[0].Zone == "":
			return "an Envoy without a zone"
		case ps[0].Envoys == 1:
			return "an Envoy in " + ps[0].Zone
		case ps[0].Zone == "":
			return fmt.Sprintf("%d Envoys without a zone", ps[0].Envoys)
		}
		return fmt.Sprintf("%d Envoys in %s", ps[0].Envoys, ps[0].Zone)
	}
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s (%d)", name(p.Zone), p.Envoys))
	}
	return "Envoys in " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
