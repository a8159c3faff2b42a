package xdsbuild

import (
	"encoding/hex"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	cswrrv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/client_side_weighted_round_robin/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/common/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	maglevv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	randomv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	ringhashv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Cluster builds the cluster of one backend; its endpoints come over EDS under the same name, or, for a
// cluster of host names, inside it.
func Cluster(c *ir.Cluster) *clusterv3.Cluster {
	th := &clusterv3.CircuitBreakers_Thresholds{
		Priority:           corev3.RoutingPriority_DEFAULT,
		MaxConnections:     wrapperspb.UInt32(c.CircuitBreakers.MaxConnections),
		MaxPendingRequests: wrapperspb.UInt32(c.CircuitBreakers.MaxPendingRequests),
		MaxRequests:        wrapperspb.UInt32(c.CircuitBreakers.MaxRequests),
		MaxRetries:         wrapperspb.UInt32(c.CircuitBreakers.MaxRetries),
	}
	if rb := c.CircuitBreakers.RetryBudget; rb != nil {
		th.RetryBudget = &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
			BudgetPercent:       &typev3.Percent{Value: rb.Percent},
			MinRetryConcurrency: wrapperspb.UInt32(rb.MinConcurrency),
		}
	}
	cb := &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
	if n := c.CircuitBreakers.MaxConnectionsPerEndpoint; n > 0 {
		cb.PerHostThresholds = []*clusterv3.CircuitBreakers_Thresholds{{Priority: corev3.RoutingPriority_DEFAULT, MaxConnections: wrapperspb.UInt32(n)}}
	}
	out := &clusterv3.Cluster{
		Name:                 c.Name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads(edsInitialFetchTimeout), ServiceName: c.Name},
		ConnectTimeout:       durationpb.New(c.ConnectTimeout),
		LoadBalancingPolicy:  loadBalancingPolicy(c),
		CircuitBreakers:      cb,
		OutlierDetection:     outlierDetection(c.Outlier),
		Metadata:             sourceMetadata(c.Source),
	}
	if c.BufferBytes > 0 {
		// Bounds what Envoy buffers from a backend that sends faster than the client reads (1 MiB by default).
		out.PerConnectionBufferLimitBytes = wrapperspb.UInt32(c.BufferBytes)
	}
	if hc := healthCheck(c.HealthCheck); hc != nil {
		out.HealthChecks = []*corev3.HealthCheck{hc}
		// An endpoint gone from the load assignment (removed from the spec, or put under maintenance: lbctl
		// endpoint maintenance) leaves at once, as with nginx and HAProxy: by default Envoy keeps a removed
		// host that passes its active health checks, so it would keep taking traffic (requests under way to it
		// finish either way). Measured in e2e TestEndpointDrainAndMaintenance.
		out.IgnoreHealthOnHostRemoval = true
	}
	// Envoy hands a health change (an active check failing, an outlier ejection) to its workers at once only
	// when none was handed over in the last update_merge_window (1 s by default); later ones wait for that
	// window to end. So when several endpoints die together, as in a zone outage, every one after the first
	// kept its share of the traffic for up to a second after Envoy knew it was down: each such request paid
	// a refused connect and a retry (and could fail once its retries met dead endpoints too), and the spill to
	// the next zoneFailover level came late. Measured: with 2 of 5 zone-a endpoints killed, 200 of 3,000
	// requests still went to the second one, and 11-13 % instead of 16 % reached zone-b
	// (TestWhatIfFailoverMatchesTraffic). Merging saves workers' rebuilds in clusters of thousands of
	// flapping hosts, which is not what lbplane's backends are.
	out.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{UpdateMergeWindow: durationpb.New(0)}
	if c.PanicThreshold != nil {
		out.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: *c.PanicThreshold}
	}
	if c.KeepDrainingSessions {
		// A session (the stateful session filter's cookie or header) names its endpoint, which Envoy takes
		// only in these states; Envoy's default leaves DRAINING out, so a session on a draining endpoint
		// would move at once. Draining endpoints still get no new client: load balancing skips them. The
		// filter is not strict, so a session whose endpoint is gone or failing is balanced as usual.
		out.CommonLbConfig.OverrideHostStatus = &corev3.HealthStatusSet{Statuses: SessionHostStatuses}
	}
	if po := protocolOptions(c); po != nil {
		out.TypedExtensionProtocolOptions = map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(po)}
	}
	if ka := c.TCPKeepalive; ka != nil {
		k := &corev3.TcpKeepalive{}
		if ka.Time > 0 {
			k.KeepaliveTime = wrapperspb.UInt32(uint32(ka.Time.Seconds()))
		}
		if ka.Interval > 0 {
			k.KeepaliveInterval = wrapperspb.UInt32(uint32(ka.Interval.Seconds()))
		}
		if ka.Probes > 0 {
			k.KeepaliveProbes = wrapperspb.UInt32(ka.Probes)
		}
		out.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: k}
	}
	if t := c.TLS; t != nil {
		// Envoy as a client stops at TLS 1.2 unless told otherwise.
		ctx := &tlsv3.UpstreamTlsContext{Sni: t.SNI, CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3}}}
		if t.AutoSNI {
			// Each endpoint's host name is its SNI, and its certificate is checked against that name
			// (which replaces the SAN matcher below).
			ctx.AutoHostSni, ctx.AutoSniSanValidation = true, true
		}
		if t.CASecret != "" {
			// The CA alone would accept any certificate it signed: the name must match the SNI too.
			ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
						SanType: tlsv3.SubjectAltNameMatcher_DNS,
						Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: t.SNI}},
					}}},
					ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: t.CASecret, SdsConfig: ads(0)},
				},
			}
		}
		if t.AutoSNI && t.CASecret != "" {
			ctx.CommonTlsContext.GetCombinedValidationContext().DefaultValidationContext.MatchTypedSubjectAltNames = nil
		}
		if c.HTTP2 {
			ctx.CommonTlsContext.AlpnProtocols = []string{"h2"}
		}
		if t.ClientCertSecret != "" {
			ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: t.ClientCertSecret, SdsConfig: ads(0)}}
		}
		out.TransportSocket = &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}}
	}
	if c.PerEndpointStats {
		out.TrackClusterStats = &clusterv3.TrackClusterStats{PerEndpointStats: true}
	}
	sendProxyProtocol(c, out)
	dnsDiscovery(c, out)
	return out
}

// SessionHostStatuses are the endpoint states a session keeps its endpoint in when draining endpoints keep
// their sessions: Envoy's default set (UNKNOWN, HEALTHY, DEGRADED) and DRAINING, as Istio sets it.
var SessionHostStatuses = []corev3.HealthStatus{corev3.HealthStatus_UNKNOWN, corev3.HealthStatus_HEALTHY,
	corev3.HealthStatus_DEGRADED, corev3.HealthStatus_DRAINING}

func protocolOptions(c *ir.Cluster) *httpv3.HttpProtocolOptions {
	if !c.HTTP2 && c.MaxRequestsPerConnection == 0 && c.IdleTimeout == nil && c.MaxConnectionDuration == nil {
		return nil
	}
	po := &httpv3.HttpProtocolOptions{}
	if c.MaxRequestsPerConnection > 0 || c.IdleTimeout != nil || c.MaxConnectionDuration != nil {
		po.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{}
		if c.MaxRequestsPerConnection > 0 {
			po.CommonHttpProtocolOptions.MaxRequestsPerConnection = wrapperspb.UInt32(c.MaxRequestsPerConnection)
		}
		if c.IdleTimeout != nil {
			po.CommonHttpProtocolOptions.IdleTimeout = durationpb.New(*c.IdleTimeout)
		}
		if c.MaxConnectionDuration != nil {
			po.CommonHttpProtocolOptions.MaxConnectionDuration = durationpb.New(*c.MaxConnectionDuration)
		}
	}
	explicit := &httpv3.HttpProtocolOptions_ExplicitHttpConfig{}
	if c.HTTP2 {
		explicit.ProtocolConfig = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}
	} else {
		explicit.ProtocolConfig = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}
	}
	po.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: explicit}
	return po
}

func slowStart(s *ir.SlowStart) *commonv3.SlowStartConfig {
	if s == nil {
		return nil
	}
	return &commonv3.SlowStartConfig{
		SlowStartWindow:  durationpb.New(s.Window),
		Aggression:       &corev3.RuntimeDouble{DefaultValue: s.Aggression, RuntimeKey: "lbplane.slow_start.aggression"},
		MinWeightPercent: &typev3.Percent{Value: s.MinWeightPercent},
	}
}

func loadBalancingPolicy(c *ir.Cluster) *clusterv3.LoadBalancingPolicy {
	var p *corev3.TypedExtensionConfig
	switch c.Algorithm {
	case ir.LeastRequest:
		lr := &leastrequestv3.LeastRequest{ChoiceCount: wrapperspb.UInt32(c.ChoiceCount), SlowStartConfig: slowStart(c.SlowStart), LocalityLbConfig: localityLbConfig(c)}
		if c.ActiveRequestBias != nil {
			lr.ActiveRequestBias = &corev3.RuntimeDouble{DefaultValue: *c.ActiveRequestBias, RuntimeKey: "lbplane.least_request.active_request_bias"}
		}
		p = typed("envoy.load_balancing_policies.least_request", lr)
	case ir.BackendUtilization:
		p = utilizationPolicy(c)
	case ir.Random:
		p = typed("envoy.load_balancing_policies.random", &randomv3.Random{LocalityLbConfig: localityLbConfig(c)})
	case ir.RingHash:
		rh := &ringhashv3.RingHash{}
		if c.RingHash != nil {
			rh.MinimumRingSize, rh.MaximumRingSize = wrapperspb.UInt64(c.RingHash.Min), wrapperspb.UInt64(c.RingHash.Max)
		}
		rh.ConsistentHashingLbConfig = consistentHashing(c)
		rh.LocalityWeightedLbConfig = localityLbConfig(c).GetLocalityWeightedLbConfig()
		p = typed("envoy.load_balancing_policies.ring_hash", rh)
	case ir.Maglev:
		mg := &maglevv3.Maglev{}
		if c.MaglevTableSize > 0 {
			mg.TableSize = wrapperspb.UInt64(c.MaglevTableSize)
		}
		mg.ConsistentHashingLbConfig = consistentHashing(c)
		mg.LocalityWeightedLbConfig = localityLbConfig(c).GetLocalityWeightedLbConfig()
		p = typed("envoy.load_balancing_policies.maglev", mg)
	default:
		p = typed("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{SlowStartConfig: slowStart(c.SlowStart), LocalityLbConfig: localityLbConfig(c)})
	}
	return &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{TypedExtensionConfig: p}}}
}

func payload(s string) *corev3.HealthCheck_Payload {
	return &corev3.HealthCheck_Payload{Payload: &corev3.HealthCheck_Payload_Text{Text: strings.ToUpper(hex.EncodeToString([]byte(s)))}}
}

func healthCheck(h *ir.HealthCheck) *corev3.HealthCheck {
	if h == nil {
		return nil
	}
	hc := &corev3.HealthCheck{
		Timeout:            durationpb.New(h.Timeout),
		Interval:           durationpb.New(h.Interval),
		HealthyThreshold:   wrapperspb.UInt32(h.Healthy),
		UnhealthyThreshold: wrapperspb.UInt32(h.Unhealthy),
		// Envoy probes a cluster that never had traffic only every 60s by default; the configured interval
		// is what users expect, traffic or not.
		NoTrafficInterval: durationpb.New(h.Interval),
	}
	if h.Jitter > 0 {
		hc.IntervalJitter = durationpb.New(h.Jitter)
	}
	switch h.Type {
	case ir.HealthHTTP:
		hh := &corev3.HealthCheck_HttpHealthCheck{Path: h.Path, Host: h.Host,
			Method: corev3.RequestMethod(corev3.RequestMethod_value[h.Method])}
		for _, r := range h.Statuses {
			hh.ExpectedStatuses = append(hh.ExpectedStatuses, &typev3.Int64Range{Start: r[0], End: r[1]})
		}
		if h.Body != "" {
			hh.Receive = []*corev3.HealthCheck_Payload{payload(h.Body)}
		}
		hc.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: hh}
	case ir.HealthTCP:
		tc := &corev3.HealthCheck_TcpHealthCheck{}
		if h.Send != "" {
			tc.Send = payload(h.Send)
		}
		if h.Receive != "" {
			tc.Receive = []*corev3.HealthCheck_Payload{payload(h.Receive)}
		}
		hc.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: tc}
	case ir.HealthGRPC:
		hc.HealthChecker = &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{ServiceName: h.Service}}
	}
	return hc
}

// outlierDetection turns on exactly the detectors that are set: Envoy enables consecutive 5xx and success
// rate by default as soon as outlier detection is present, so the others are switched off explicitly.
func outlierDetection(o *ir.Outlier) *clusterv3.OutlierDetection {
	if o == nil {
		return nil
	}
	enforce := func(on bool) *wrapperspb.UInt32Value {
		if on {
			return wrapperspb.UInt32(100)
		}
		return wrapperspb.UInt32(0)
	}
	od := &clusterv3.OutlierDetection{
		Interval:                           durationpb.New(o.Interval),
		BaseEjectionTime:                   durationpb.New(o.BaseEjectionTime),
		MaxEjectionPercent:                 wrapperspb.UInt32(o.MaxEjectionPercent),
		EnforcingConsecutive_5Xx:           enforce(o.Consecutive5xx != nil),
		EnforcingConsecutiveGatewayFailure: enforce(o.ConsecutiveGateway != nil),
		EnforcingSuccessRate:               enforce(o.SuccessRate != nil),
		EnforcingFailurePercentage:         enforce(o.FailurePercentage != nil),
	}
	if o.MaxEjectionTime > 0 {
		od.MaxEjectionTime = durationpb.New(o.MaxEjectionTime)
	}
	if o.AlwaysEjectOne {
		od.AlwaysEjectOneHost = wrapperspb.Bool(true)
	}
	if o.Consecutive5xx != nil {
		od.Consecutive_5Xx = wrapperspb.UInt32(*o.Consecutive5xx)
	}
	if o.ConsecutiveGateway != nil {
		od.ConsecutiveGatewayFailure = wrapperspb.UInt32(*o.ConsecutiveGateway)
	}
	if o.ConsecutiveLocalOrigin != nil {
		od.SplitExternalLocalOriginErrors = true
		od.ConsecutiveLocalOriginFailure = wrapperspb.UInt32(*o.ConsecutiveLocalOrigin)
		od.EnforcingConsecutiveLocalOriginFailure = wrapperspb.UInt32(100)
		od.EnforcingLocalOriginSuccessRate = wrapperspb.UInt32(0)
	}
	if sr := o.SuccessRate; sr != nil {
		od.SuccessRateStdevFactor = wrapperspb.UInt32(sr.StdevFactor)
		od.SuccessRateMinimumHosts = wrapperspb.UInt32(sr.MinimumHosts)
		od.SuccessRateRequestVolume = wrapperspb.UInt32(sr.RequestVolume)
	}
	if fp := o.FailurePercentage; fp != nil {
		od.FailurePercentageThreshold = wrapperspb.UInt32(fp.Threshold)
		od.FailurePercentageMinimumHosts = wrapperspb.UInt32(fp.MinimumHosts)
		od.FailurePercentageRequestVolume = wrapperspb.UInt32(fp.RequestVolume)
	}
	return od
}

// consistentHashing bounds the load of hashing clusters (consistent hashing with bounded loads).
func consistentHashing(c *ir.Cluster) *commonv3.ConsistentHashingLbConfig {
	if c.HashBalanceFactor == 0 {
		return nil
	}
	return &commonv3.ConsistentHashingLbConfig{HashBalanceFactor: wrapperspb.UInt32(c.HashBalanceFactor)}
}

// utilizationPolicy is client-side weighted round robin on the endpoints' ORCA load reports.
func utilizationPolicy(c *ir.Cluster) *corev3.TypedExtensionConfig {
	u := c.Utilization
	cfg := &cswrrv3.ClientSideWeightedRoundRobin{}
	if u != nil {
		cfg.BlackoutPeriod = durationpb.New(u.BlackoutPeriod)
		cfg.WeightUpdatePeriod = durationpb.New(u.WeightUpdatePeriod)
		cfg.WeightExpirationPeriod = durationpb.New(u.WeightExpirationPeriod)
		cfg.ErrorUtilizationPenalty = wrapperspb.Float(float32(u.ErrorUtilizationPenalty))
	}
	return typed("envoy.load_balancing_policies.client_side_weighted_round_robin", cfg)
}
