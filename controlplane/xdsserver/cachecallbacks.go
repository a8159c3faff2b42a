package xdsserver

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"

	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// cacheCallbacks returns the server callbacks that report streams to the cache, then call next. The xDS
// server must be given them: without them the cache cannot forget closed streams, and takes any request
// of a type as the answer to its last response.
func cacheCallbacks(c *xdscache.Cache, next serverv3.Callbacks) serverv3.Callbacks {
	return &callbacks{Callbacks: next, c: c}
}

type callbacks struct {
	serverv3.Callbacks
	c *xdscache.Cache
}

func (cb *callbacks) OnStreamClosed(id int64, n *corev3.Node) {
	cb.c.CloseStream(xdscache.StreamID{ID: id})
	cb.Callbacks.OnStreamClosed(id, n)
}

func (cb *callbacks) OnDeltaStreamClosed(id int64, n *corev3.Node) {
	cb.c.CloseStream(xdscache.StreamID{Delta: true, ID: id})
	cb.Callbacks.OnDeltaStreamClosed(id, n)
}

func (cb *callbacks) OnStreamRequest(id int64, r *discovery.DiscoveryRequest) error {
	if err := cb.Callbacks.OnStreamRequest(id, r); err != nil {
		return err
	}
	cb.c.BindRequest(xdscache.StreamID{ID: id}, r)
	return nil
}

func (cb *callbacks) OnStreamDeltaRequest(id int64, r *discovery.DeltaDiscoveryRequest) error {
	if err := cb.Callbacks.OnStreamDeltaRequest(id, r); err != nil {
		return err
	}
	cb.c.BindRequest(xdscache.StreamID{Delta: true, ID: id}, r)
	return nil
}

func (cb *callbacks) OnStreamResponse(ctx context.Context, id int64, req *discovery.DiscoveryRequest, r *discovery.DiscoveryResponse) {
	cb.c.Responded(xdscache.StreamID{ID: id}, r.GetTypeUrl(), r.GetNonce())
	cb.Callbacks.OnStreamResponse(ctx, id, req, r)
}

func (cb *callbacks) OnStreamDeltaResponse(id int64, req *discovery.DeltaDiscoveryRequest, r *discovery.DeltaDiscoveryResponse) {
	cb.c.Responded(xdscache.StreamID{Delta: true, ID: id}, r.GetTypeUrl(), r.GetNonce())
	cb.Callbacks.OnStreamDeltaResponse(id, req, r)
}
