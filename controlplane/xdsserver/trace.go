package xdsserver

import (
	"context"
	"log/slog"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// traceDeltaRequest and traceDeltaResponse log every delta exchange at debug level (--log-level debug): what
// an Envoy subscribed to and how large each request and response was. It is how a slow first config is
// told apart (one giant response, a request near the gRPC receive limit, an Envoy that subscribes late);
// sizes are computed only when debug logging is on, as a 100,000-resource response takes time to measure.
// "at" is the wall clock in microseconds (the log's own time has milliseconds), so that a benchmark can
// line an exchange up with its own clock (bench/runner -cp-trace).
func (t *Tracker) traceDeltaRequest(id int64, r *discovery.DeltaDiscoveryRequest) {
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	t.log.Debug("delta request", "stream", id, "type", r.GetTypeUrl(), "nonce", r.GetResponseNonce(),
		"subscribe", len(r.GetResourceNamesSubscribe()), "unsubscribe", len(r.GetResourceNamesUnsubscribe()),
		"initialVersions", len(r.GetInitialResourceVersions()), "nack", r.GetErrorDetail() != nil, "bytes", proto.Size(r), "at", time.Now().UnixMicro())
}

func (t *Tracker) traceDeltaResponse(id int64, r *discovery.DeltaDiscoveryResponse) {
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	t.log.Debug("delta response", "stream", id, "type", r.GetTypeUrl(), "nonce", r.GetNonce(),
		"resources", len(r.GetResources()), "removed", len(r.GetRemovedResources()), "bytes", proto.Size(r), "at", time.Now().UnixMicro())
}
