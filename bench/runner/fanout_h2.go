package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// errServerEnded is a connection or stream the server ended: a GOAWAY, the connection closed (what lbplane
// does to a stream past --xds-max-connection-age once everything it was sent is answered, and what a
// killed replica's kernel does), a reset, or the stream's trailers. An Envoy reconnects at once.
var errServerEnded = errors.New("the server ended the connection")

// h2Client is one simulated Envoy on a bare HTTP/2 connection, with one ADS stream: delta
// (DeltaAggregatedResources, every type subscribed by wildcard) or state of the world
// (StreamAggregatedResources: clusters and listeners by wildcard, endpoints for the clusters the cluster
// response names, routes for the route configurations its listeners' HTTP connection managers name). One
// goroutine reads frames, decodes each response (proto.Unmarshal of the whole response, as a grpc-go client
// does) and writes its ACK, and the ACKs of the responses read together go out in one write. A grpc-go
// client hands every message between three goroutines (the transport's reader, the stream's Recv, the loopy
// writer) and, with 10,000 of them on the runner's one core, took longer per response than lbplane did to
// send it: the row measured the clients (bench/results/2026-11-23-vm-incremental section 6.4). What lbplane
// sees on the wire is the same: one connection and one ADS stream per client, its requests, and an ACK per
// response.
//
// What it holds is kept across its connections, so that a reconnection says so as Envoy's does: a delta
// stream sends its resources' versions (initial_resource_versions), a state-of-the-world stream the
// version_info it last accepted of each type and the names it subscribes to.
type h2Client struct {
	node  *corev3.Node
	types []string
	sotw  bool
	// got is called for each response, with its type's index in types, its version (system_version_info,
	// version_info) and whether it changed anything: a delta response with resources or removals; every
	// state-of-the-world response.
	got func(typ int, version string, changed bool)
	// cluster, when set, is told the name and connect timeout (whole seconds) of every cluster a response
	// carries, before the response is acknowledged: the client-churn row reads from it which change of each
	// probe policy a client has (policyBooks).
	cluster func(name string, connectTimeout int64)

	held    []map[string]string // delta: by type, the resources held and their versions
	version []string            // state of the world: by type, the version_info last accepted
	names   [][]string          // state of the world: by type, the names subscribed to (endpoints, routes)
	nonce   []string            // state of the world: by type, the last nonce on this connection
	// responses counts the responses read on the current connection.
	responses int
}

func newH2Client(node *corev3.Node, types []string, sotw bool, got func(typ int, version string, changed bool)) *h2Client {
	c := &h2Client{node: node, types: types, sotw: sotw, got: got}
	if sotw {
		c.version, c.names, c.nonce = make([]string, len(types)), make([][]string, len(types)), make([]string, len(types))
	} else {
		c.held = make([]map[string]string, len(types))
	}
	return c
}

// serverEnded tells a read error that is the server (or its kernel) closing the connection from others.
func serverEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// run opens one connection to addr and serves its stream until it ends; it returns errServerEnded (wrapped)
// when the server ended it.
func (c *h2Client) run(ctx context.Context, addr string) error {
	c.responses = 0
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	br, bw := bufio.NewReaderSize(conn, 32<<10), bufio.NewWriterSize(conn, 4<<10)
	fr := http2.NewFramer(bw, br)
	fr.MaxHeaderListSize = 1 << 20
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	// Large windows, as the grpc-go client had (static 1 MiB) and more: the client never has to wait for
	// window updates of its own; it still returns what it reads (below).
	const window = 1 << 30
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		return err
	}
	if err := fr.WriteWindowUpdate(0, window-65535); err != nil {
		return err
	}
	method := "DeltaAggregatedResources"
	if c.sotw {
		method = "StreamAggregatedResources"
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
		{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/" + method},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return err
		}
	}
	const sid = 1
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	var out []byte
	send := func(req proto.Message) error {
		out = out[:0]
		out = append(out, 0, 0, 0, 0, 0)
		out, err = proto.MarshalOptions{}.MarshalAppend(out, req)
		if err != nil {
			return err
		}
		binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
		return fr.WriteData(sid, false, out)
	}
	if err := c.subscribe(send); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var msg []byte  // the gRPC messages read and not yet decoded
	unreturned := 0 // bytes read and not yet given back in a window update
	for {
		// Everything read so far is answered: write it before waiting for more.
		if br.Buffered() == 0 && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return ended(err)
			}
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return ended(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("%w: GOAWAY %v", errServerEnded, f.ErrCode)
		case *http2.RSTStreamFrame:
			return fmt.Errorf("%w: stream reset %v", errServerEnded, f.ErrCode)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return fmt.Errorf("%w: the stream's trailers", errServerEnded)
			}
		case *http2.DataFrame:
			msg = append(msg, f.Data()...)
			if unreturned += int(f.Length); unreturned > window/2 {
				if err := fr.WriteWindowUpdate(0, uint32(unreturned)); err != nil {
					return ended(err)
				}
				err, unreturned = fr.WriteWindowUpdate(sid, uint32(unreturned)), 0
			}
			for err == nil && len(msg) >= 5 {
				n := int(binary.BigEndian.Uint32(msg[1:5]))
				if len(msg) < 5+n {
					break
				}
				err = c.response(msg[5:5+n], send)
				msg = msg[5+n:]
			}
			if len(msg) == 0 && cap(msg) > 64<<10 {
				msg = nil // a large first response is not kept for the rest of the run
			}
		}
		if err != nil {
			return ended(err)
		}
	}
}

func ended(err error) error {
	if serverEnded(err) {
		return fmt.Errorf("%w: %v", errServerEnded, err)
	}
	return err
}

// subscribe sends the stream's first requests: every type (delta), or clusters and listeners and whatever
// endpoints and routes it held (state of the world), the first with the node.
func (c *h2Client) subscribe(send func(proto.Message) error) error {
	first := true
	for t, typ := range c.types {
		var req proto.Message
		if c.sotw {
			if !wildcardType(typ) && len(c.names[t]) == 0 {
				continue // asked for once the response naming them comes
			}
			c.nonce[t] = ""
			r := c.sotwRequest(t)
			if first {
				r.Node = c.node
			}
			req = r
		} else {
			r := &discovery.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: c.held[t]}
			if first {
				r.Node = c.node
			}
			req = r
		}
		first = false
		if err := send(req); err != nil {
			return err
		}
	}
	return nil
}

// wildcardType tells the types an Envoy subscribes to by wildcard (clusters and listeners) from those it
// asks for by name.
func wildcardType(typ string) bool {
	return typ == resource.ClusterType || typ == resource.ListenerType
}

func (c *h2Client) sotwRequest(t int) *discovery.DiscoveryRequest {
	return &discovery.DiscoveryRequest{TypeUrl: c.types[t], VersionInfo: c.version[t], ResponseNonce: c.nonce[t], ResourceNames: c.names[t]}
}

// response decodes one response, reports it and acknowledges it; a state-of-the-world cluster or listener
// response that names other endpoints or routes than those subscribed to is followed by a request for them.
func (c *h2Client) response(b []byte, send func(proto.Message) error) error {
	c.responses++
	if !c.sotw {
		resp := &discovery.DeltaDiscoveryResponse{}
		if err := proto.Unmarshal(b, resp); err != nil {
			return err
		}
		if t := slices.Index(c.types, resp.GetTypeUrl()); t >= 0 {
			if len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0 {
				held := c.held[t]
				if held == nil {
					held = make(map[string]string, len(resp.GetResources()))
					c.held[t] = held
				}
				for _, r := range resp.GetResources() {
					held[r.GetName()] = r.GetVersion()
				}
				for _, n := range resp.GetRemovedResources() {
					delete(held, n)
				}
			}
			if c.cluster != nil && resp.GetTypeUrl() == resource.ClusterType {
				for _, r := range resp.GetResources() {
					c.tellCluster(r.GetResource())
				}
			}
			c.got(t, resp.GetSystemVersionInfo(), len(resp.GetResources()) > 0 || len(resp.GetRemovedResources()) > 0)
		}
		return send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
	}
	resp := &discovery.DiscoveryResponse{}
	if err := proto.Unmarshal(b, resp); err != nil {
		return err
	}
	t := slices.Index(c.types, resp.GetTypeUrl())
	if t < 0 {
		return send(&discovery.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()})
	}
	c.version[t], c.nonce[t] = resp.GetVersionInfo(), resp.GetNonce()
	// What this response names of the next type: a cluster response its clusters' endpoints, a listener
	// response its route configurations.
	var dep = -1
	var names []string
	switch resp.GetTypeUrl() {
	case resource.ClusterType:
		dep, names = slices.Index(c.types, resource.EndpointType), edsNames(resp.GetResources())
	case resource.ListenerType:
		dep, names = slices.Index(c.types, resource.RouteType), rdsNames(resp.GetResources())
	}
	if c.cluster != nil && resp.GetTypeUrl() == resource.ClusterType {
		for _, a := range resp.GetResources() {
			c.tellCluster(a)
		}
	}
	c.got(t, resp.GetVersionInfo(), true)
	if err := send(c.sotwRequest(t)); err != nil {
		return err
	}
	if dep >= 0 && !slices.Equal(names, c.names[dep]) {
		c.names[dep] = names
		return send(c.sotwRequest(dep))
	}
	return nil
}

// tellCluster decodes a cluster and tells c.cluster its name and connect timeout.
func (c *h2Client) tellCluster(a *anypb.Any) {
	var cl clusterv3.Cluster
	if a.UnmarshalTo(&cl) == nil {
		c.cluster(cl.GetName(), cl.GetConnectTimeout().GetSeconds())
	}
}

// edsNames are the endpoint assignments the clusters of a state-of-the-world response ask for (those with
// an EDS config: its service name, or the cluster's), sorted.
func edsNames(rs []*anypb.Any) []string {
	var out []string
	for _, a := range rs {
		var cl clusterv3.Cluster
		if a.UnmarshalTo(&cl) != nil {
			continue
		}
		if cl.GetType() != clusterv3.Cluster_EDS && cl.GetEdsClusterConfig() == nil {
			continue
		}
		name := cl.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = cl.GetName()
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// rdsNames are the route configurations the HTTP connection managers of a state-of-the-world response's
// listeners ask for over RDS, sorted.
func rdsNames(rs []*anypb.Any) []string {
	var out []string
	for _, a := range rs {
		var l listenerv3.Listener
		if a.UnmarshalTo(&l) != nil {
			continue
		}
		chains := l.GetFilterChains()
		if dc := l.GetDefaultFilterChain(); dc != nil {
			chains = append(slices.Clip(chains), dc)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if tc := f.GetTypedConfig(); tc == nil || !tc.MessageIs(&hcm) || tc.UnmarshalTo(&hcm) != nil {
					continue
				}
				if n := hcm.GetRds().GetRouteConfigName(); n != "" {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
