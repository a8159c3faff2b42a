package xdscache

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Client profiles. Envoy and proxyless gRPC clients (grpc-go, grpc-java, grpc-c++ reading xDS themselves)
// read the same xDS with different tolerances, so a group's gRPC clients are served the group's gRPC
// profile (xdsbuild.GRPC), published under GRPCKey(group), and its Envoys the group itself.
const (
	ClientEnvoy = "envoy"
	ClientGRPC  = "grpc"
)

// ClientKey is the node metadata field a client may set to say what it is ("grpc" or "envoy"); lbctl
// bootstrap --grpc sets it. Without it the user agent tells.
const ClientKey = "lbplane.io/client"

// ClientOf tells what kind of client a node is: ClientGRPC for a node whose metadata says so, or whose user
// agent name is a gRPC library's ("gRPC Go", "gRPC Java", "gRPC C-core"...); ClientEnvoy otherwise.
func ClientOf(n *corev3.Node) string {
	switch n.GetMetadata().GetFields()[ClientKey].GetStringValue() {
	case ClientGRPC:
		return ClientGRPC
	case ClientEnvoy:
		return ClientEnvoy
	}
	if ua := n.GetUserAgentName(); len(ua) >= 5 && strings.EqualFold(ua[:5], "gRPC ") {
		return ClientGRPC
	}
	return ClientEnvoy
}

// grpcSuffix cannot be part of a group name (a DNS subdomain), so a profile's key never meets a group.
const grpcSuffix = "#grpc"

// GRPCKey is the cache key the gRPC profile of a group is published under.
func GRPCKey(group string) string { return group + grpcSuffix }

// ServedKey is the cache key of what a node is served: its group, or its group's gRPC profile.
func ServedKey(n *corev3.Node) string { return KeyFor(GroupOf(n), ClientOf(n)) }

// KeyFor is the cache key of what a client of the given kind in a group is served.
func KeyFor(group, client string) string {
	if client == ClientGRPC {
		return GRPCKey(group)
	}
	return group
}

// profileGroup returns the group a gRPC profile key belongs to, and whether key is one.
func profileGroup(key string) (string, bool) { return strings.CutSuffix(key, grpcSuffix) }
