// Package xdsbuild turns one proxy group of the IR into Envoy resources, one small builder per type. It is
// pure and never fails on user input: the IR is already valid. The output is checked with the protos' own
// validation rules before anyone publishes it.
package xdsbuild

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Types lists the resource types lbplane serves, in the order Envoy must receive them so that nothing refers
// to what it does not have yet: secrets (certificates), clusters, their endpoints, listeners, the scopes a
// listener with many hosts reads, then the routes listeners and scopes read.
var Types = []string{resource.SecretType, resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.ScopedRouteType, resource.RouteType}

// Resources holds the Envoy resources of one proxy group by type URL, each list sorted by name.
type Resources map[string][]proto.Message

// edsInitialFetchTimeout bounds how long a new or changed cluster waits for its endpoints. lbplane answers
// every EDS name it is asked for, so this only matters when the control plane is unreachable; then a cluster
// should come up empty rather than block the listeners behind it forever.
const edsInitialFetchTimeout = 15 * time.Second

// Build returns the resources of one group, validated: the assembly of the group from nothing (Assemble),
// decoded from the bytes that would be sent. There is one assembler; a full build is not a second one.
func Build(g *ir.Group) (Resources, error) {
	a, err := Assemble(nil, g)
	if err != nil {
		return nil, err
	}
	out := Resources{}
	for _, typ := range Types {
		if list := a.State().Resources(typ); len(list) > 0 {
			out[typ] = list
		}
	}
	return out, nil
}

func ads(initialFetchTimeout time.Duration) *corev3.ConfigSource {
	cs := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	if initialFetchTimeout > 0 {
		cs.InitialFetchTimeout = durationpb.New(initialFetchTimeout)
	}
	return cs
}

func typed(name string, m proto.Message) *corev3.TypedExtensionConfig {
	return &corev3.TypedExtensionConfig{Name: name, TypedConfig: mustAny(m)}
}

// mustAny packs m with its maps in key order (an access log's JSON format is a map): the same config gives
// the same bytes, hence the same resource version, and no Envoy is pushed a config that did not change.
func mustAny(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return a
}

// LoadAssignment builds the EDS resource of one backend: one locality per zone, in the order zones first
// appear (endpoints without a zone share one locality with no zone). With zone failover each zone's
// locality gets the priority of its place in the list, unlisted zones the last one.
func LoadAssignment(c *ir.Cluster) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	if c.OverprovisioningFactor > 0 {
		cla.Policy = &endpointv3.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(c.OverprovisioningFactor)}
	}
	type level struct {
		zone            string
		backup, retired bool
	}
	byZone := map[level]*endpointv3.LocalityLbEndpoints{}
	priority := zonePriorities(c)
	// Backups come after every level of the others, and retired endpoints after them.
	var backupPriority, retiredPriority uint32
	backups := false
	for _, e := range c.Endpoints {
		switch {
		case e.Retired:
		case e.Backup:
			backups = true
		default:
			backupPriority = max(backupPriority, priority[e.Zone]+1)
		}
	}
	retiredPriority = backupPriority
	if backups {
		retiredPriority++
	}
	for _, e := range c.Endpoints {
		ep := &endpointv3.Endpoint{Address: socketAddress(e.Address, e.Port), Hostname: e.Hostname}
		if e.HealthCheckPort != 0 || e.HealthCheckHost != "" {
			ep.HealthCheckConfig = &endpointv3.Endpoint_HealthCheckConfig{PortValue: e.HealthCheckPort, Hostname: e.HealthCheckHost}
		}
		lb := &endpointv3.LbEndpoint{
			HostIdentifier:      &endpointv3.LbEndpoint_Endpoint{Endpoint: ep},
			LoadBalancingWeight: wrapperspb.UInt32(e.Weight),
		}
		if e.Draining || e.Retired {
			// Draining takes the host out of load balancing; Envoy keeps its open connections (and, with
			// KeepDrainingSessions, its sessions).
			lb.HealthStatus = corev3.HealthStatus_DRAINING
		}
		key := level{e.Zone, e.Backup, e.Retired}
		loc, ok := byZone[key]
		if !ok {
			loc = &endpointv3.LocalityLbEndpoints{}
			if e.Zone != "" {
				loc.Locality = &corev3.Locality{Zone: e.Zone}
			}
			loc.Priority = priority[e.Zone]
			loc.LoadBalancingWeight = zoneWeight(c, e.Zone)
			switch {
			case e.Retired:
				// A level of draining endpoints only: its availability is 0, so Envoy gives it no load
				// unless every level is in panic (then load follows the number of endpoints per level),
				// and its endpoints count in no other level's panic threshold.
				loc.Priority = retiredPriority
			case e.Backup:
				loc.Priority = backupPriority
			}
			byZone[key] = loc
			cla.Endpoints = append(cla.Endpoints, loc)
		}
		loc.LbEndpoints = append(loc.LbEndpoints, lb)
	}
	return cla
}

// zonePriorities maps each zone of the cluster's endpoints to a priority level. Envoy wants the levels it
// is given to run from 0 without gaps, so listed zones without endpoints take no level.
func zonePriorities(c *ir.Cluster) map[string]uint32 {
	if len(c.ZoneFailover) == 0 {
		return nil
	}
	rank := func(zone string) int {
		if i := slices.Index(c.ZoneFailover, zone); i >= 0 {
			return i
		}
		return len(c.ZoneFailover)
	}
	present := map[int]bool{}
	for _, e := range c.Endpoints {
		if !e.Backup && !e.Retired { // backups and retired endpoints have their own levels, after these
			present[rank(e.Zone)] = true
		}
	}
	levels := slices.Sorted(maps.Keys(present))
	out := map[string]uint32{}
	for _, e := range c.Endpoints {
		out[e.Zone] = uint32(slices.Index(levels, rank(e.Zone)))
	}
	return out
}

func socketAddress(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// Secret builds the SDS resource of a certificate or a CA bundle.
func Secret(s *ir.Secret) *tlsv3.Secret {
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	if s.CA != nil {
		return &tlsv3.Secret{Name: s.Name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: inline(s.CA)}}}
	}
	return &tlsv3.Secret{Name: s.Name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(s.CertificateChain), PrivateKey: inline(s.PrivateKey)}}}
}

// Redacted returns m ready to print: a certificate secret loses its private key. Everything else is returned
// as it is.
func Redacted(m proto.Message) proto.Message {
	s, ok := m.(*tlsv3.Secret)
	if !ok || s.GetTlsCertificate() == nil {
		return m
	}
	c := proto.Clone(s).(*tlsv3.Secret)
	c.GetTlsCertificate().PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "[redacted]"}}
	return c
}

// BuildAll builds every group of c, by group name.
func BuildAll(c *ir.Config) (map[string]Resources, error) {
	out := make(map[string]Resources, len(c.Groups))
	for name, g := range c.Groups {
		r, err := Build(g)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}
