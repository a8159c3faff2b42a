package explain

import (
	"strings"

	"github.com/lbplane/lbplane/controlplane/ir"
)

// Resource types, as short names.
const (
	Listener  = "Listener"
	Routes    = "RouteConfiguration"
	Cluster   = "Cluster"
	Endpoints = "ClusterLoadAssignment"
)

// rule says where a policy field ends up: the resource (by type and a name template) and the Envoy field
// path in it. Paths use Envoy's field names; "[*]" is every element, "[name=X]" the element named X, "*"
// every value of a map, and "a|b" tries a, then b. Optional fields are left unset when the policy keeps
// Envoy's default, so not finding them is no error. A field with no Envoy field of its own (a setting of
// lbplane's, or one refused where it is written) says why in none instead.
//
// These rules are the one description of "policy field -> Envoy field": lbctl explain resolves them on the
// built resources, and hack/apiref writes them into the reference's "Envoy:" lines (FieldMappings).
type rule struct {
	// field is the policy field, with "[b]", "[e]" and "[r]" for a backend's, an endpoint's and a route's
	// index and "[]" for any other index; a trailing "*" takes every field under it.
	field    string
	typ      string
	name     string
	path     string
	optional bool
	// off: the field, when true, leaves the Envoy field out (and every field under it).
	off  bool
	none string
}

// matches tells whether the rule is the one of a field path normalised as fieldKey does.
func (ru rule) matches(key string) bool {
	if p, ok := strings.CutSuffix(ru.field, "*"); ok {
		return strings.HasPrefix(key, p)
	}
	return key == ru.field
}

const (
	cl   = "{cluster}"
	rt   = "virtual_hosts[name={vhost}].routes[name={route}]"
	ss   = rt + ".typed_per_filter_config.*.stateful_session.session_state"
	lbTC = "load_balancing_policy.policies[0].typed_extension_config.typed_config"
	hc   = "health_checks[0]"
	ep   = "endpoints[*].lb_endpoints[*].endpoint"
	lbe  = "endpoints[*].lb_endpoints[ep={ep}]"
	od   = "outlier_detection"
	cb   = "circuit_breakers.thresholds[0]"
	hpo  = "typed_extension_protocol_options.*.common_http_protocol_options"
	dtls = "filter_chains[*].transport_socket.typed_config.common_tls_context"
	utls = "transport_socket.typed_config.common_tls_context.combined_validation_context"
	// The PROXY protocol listener filter, the network rate limit, a client certificate's SDS name, the TLS
	// socket inside the upstream PROXY protocol one, and a route's local rate limit among its per-filter configs.
	ppl   = "listener_filters[name=envoy.filters.listener.proxy_protocol]"
	nrl   = "envoy.filters.network.local_ratelimit"
	ctc   = "common_tls_context.tls_certificate_sds_secret_configs[*].name"
	inner = "transport_socket.typed_config.transport_socket.typed_config."
	rrl   = rt + ".typed_per_filter_config.*."
)

// nf is a field of the named network filter's config, in the listener's filter chains or its default chain
// (HTTPS listeners with a certificate for every name).
func nf(filter, field string) string {
	sel := ".filters[name=" + filter + "].typed_config." + field
	return "filter_chains[*]" + sel + "|default_filter_chain" + sel
}

// hcmField is a field of the HTTP connection manager.
func hcmField(field string) string { return nf("envoy.filters.network.http_connection_manager", field) }

func r(field, typ, name, path string) rule {
	return rule{field: field, typ: typ, name: name, path: path}
}

func opt(field, typ, name, path string) rule {
	x := r(field, typ, name, path)
	x.optional = true
	return x
}

// off is a boolean field that, when true, leaves the Envoy field at path out.
func off(field, typ, name, path string) rule {
	x := opt(field, typ, name, path)
	x.off = true
	return x
}

// accessLog is a field of the listener's access log, on the HTTP connection manager or tcp_proxy.
func accessLog(field string) string {
	return hcmField("access_log[0]"+field) + "|" + nf("envoy.filters.network.tcp_proxy", "access_log[0]"+field)
}

// none is a field that sets no Envoy field, and why.
func none(field, why string) rule {
	return rule{field: field, none: why}
}

// B, E and R are a backend, one of its endpoints and a route.
const (
	B = "spec.backends[b]"
	E = B + ".endpoints[e]"
	R = "spec.routes[r]"
)

var rules = []rule{
	none("spec.proxyGroup", "chooses the Envoys (node.cluster) that are served this policy"),
	none("spec.rollout*", "lbplane's: how a change reaches the group's Envoys, in stages"),
	opt("spec.debugHeaders", Routes, "", "virtual_hosts[name={vhost}].response_headers_to_add[*].header.key"),
	r("spec.listener.address", Listener, "{listener}", "address.socket_address.address"),
	r("spec.listener.port", Listener, "{listener}", "address.socket_address.port_value"),
	r("spec.listener.protocol", Listener, "{listener}", "filter_chains[*].filters[0].name"),
	r("spec.listener.hostnames", Routes, "", "virtual_hosts[name={vhost}].domains"),
	r("spec.listener.tls.certificates[].*", Listener, "{listener}", dtls+".tls_certificate_sds_secret_configs[*].name"),
	r("spec.listener.tls.minVersion", Listener, "{listener}", dtls+".tls_params.tls_minimum_protocol_version"),
	r("spec.listener.tls.maxVersion", Listener, "{listener}", dtls+".tls_params.tls_maximum_protocol_version"),
	r("spec.listener.tls.cipherSuites", Listener, "{listener}", dtls+".tls_params.cipher_suites"),
	opt("spec.listener.limits.maxConnections", Listener, "{listener}", nf("envoy.filters.network.connection_limit", "max_connections")),
	r("spec.listener.limits.connectionBufferBytes", Listener, "{listener}", "per_connection_buffer_limit_bytes"),
	r("spec.listener.limits.maxRequestHeadersKB", Listener, "{listener}", hcmField("max_request_headers_kb")),
	r("spec.listener.limits.maxHeadersCount", Listener, "{listener}", hcmField("common_http_protocol_options.max_headers_count")),
	r("spec.listener.timeouts.requestHeaders", Listener, "{listener}", hcmField("request_headers_timeout")),
	r("spec.listener.timeouts.streamIdle", Listener, "{listener}", hcmField("stream_idle_timeout")),
	r("spec.listener.timeouts.connectionIdle", Listener, "{listener}", hcmField("common_http_protocol_options.idle_timeout")),
	opt("spec.listener.http2.enabled", Listener, "{listener}", hcmField("codec_type")),
	opt("spec.listener.http2.maxConcurrentStreams", Listener, "{listener}", hcmField("http2_protocol_options.max_concurrent_streams")),
	opt("spec.listener.http2.initialStreamWindowSize", Listener, "{listener}", hcmField("http2_protocol_options.initial_stream_window_size")),
	opt("spec.listener.http2.initialConnectionWindowSize", Listener, "{listener}", hcmField("http2_protocol_options.initial_connection_window_size")),
	opt("spec.listener.requests.headersWithUnderscores", Listener, "{listener}", hcmField("common_http_protocol_options.headers_with_underscores_action")),
	r("spec.listener.requests.normalizePath", Listener, "{listener}", hcmField("normalize_path")),
	opt("spec.listener.requests.mergeSlashes", Listener, "{listener}", hcmField("merge_slashes")),
	r("spec.listener.requests.escapedSlashes", Listener, "{listener}", hcmField("path_with_escaped_slashes_action")),
	opt("spec.listener.proxyProtocol.optional", Listener, "{listener}", ppl+".typed_config.allow_requests_without_proxy_protocol"),
	r("spec.listener.proxyProtocol.trustedSources", Listener, "{listener}", "filter_chains[*].filter_chain_match.direct_source_prefix_ranges"),
	r("spec.listener.rateLimit.requests", Listener, "{listener}", nf(nrl, "token_bucket.tokens_per_fill")),
	r("spec.listener.rateLimit.burst", Listener, "{listener}", nf(nrl, "token_bucket.max_tokens")),
	r("spec.listener.rateLimit.interval", Listener, "{listener}", nf(nrl, "token_bucket.fill_interval")),
	none("spec.listener.rateLimit.perClient*", "refused on the listener: routes only (routes[].rateLimit.perClient)"),
	none("spec.listener.rateLimit.headers", "refused on the listener: routes only (routes[].rateLimit.headers)"),
	off("spec.listener.accessLog.disabled", Listener, "{listener}", accessLog("")),
	opt("spec.listener.accessLog.format", Listener, "{listener}", accessLog(".typed_config.log_format")),
	opt("spec.listener.accessLog.samplePercent", Listener, "{listener}", accessLog(".filter.runtime_filter.percent_sampled")),

	r(R+".name", Routes, "", rt+".name"),
	r(R+".match.path.*", Routes, "", rt+".match.prefix|"+rt+".match.path|"+rt+".match.safe_regex|"+rt+".match.path_separated_prefix"),
	r(R+".match.headers*", Routes, "", rt+".match.headers"),
	r(R+".match.method", Routes, "", rt+".match.headers[name=:method].string_match.exact"),
	r(R+".match.queryParams*", Routes, "", rt+".match.query_parameters"),
	r(R+".backends*", Routes, "", rt+".route.cluster|"+rt+".route.weighted_clusters"),
	r(R+".timeout", Routes, "", rt+".route.timeout"),
	r(R+".idleTimeout", Routes, "", rt+".route.idle_timeout"),
	r(R+".retry.conditions", Routes, "", rt+".route.retry_policy.retry_on"),
	r(R+".retry.statusCodes", Routes, "", rt+".route.retry_policy.retriable_status_codes"),
	r(R+".retry.attempts", Routes, "", rt+".route.retry_policy.num_retries"),
	r(R+".retry.perTryTimeout", Routes, "", rt+".route.retry_policy.per_try_timeout"),
	r(R+".retry.backoff.base", Routes, "", rt+".route.retry_policy.retry_back_off.base_interval"),
	r(R+".retry.backoff.max", Routes, "", rt+".route.retry_policy.retry_back_off.max_interval"),
	opt(R+".retry.avoidPreviousHosts", Routes, "", rt+".route.retry_policy.retry_host_predicate"),
	r(R+".sessionPersistence.type", Routes, "", ss+".name"),
	r(R+".sessionPersistence.name", Routes, "", ss+".typed_config.cookie.name|"+ss+".typed_config.name"),
	r(R+".sessionPersistence.ttl", Routes, "", ss+".typed_config.cookie.ttl"),
	// A header session has no path.
	opt(R+".sessionPersistence.path", Routes, "", ss+".typed_config.cookie.path"),
	// The route's backends are served as one cluster.
	r(R+".sessionPersistence.acrossBackends", Routes, "", rt+".route.cluster"),
	r(R+".requestHeaders.set*", Routes, "", rt+".request_headers_to_add"),
	r(R+".requestHeaders.add*", Routes, "", rt+".request_headers_to_add"),
	r(R+".requestHeaders.remove", Routes, "", rt+".request_headers_to_remove"),
	r(R+".responseHeaders.set*", Routes, "", rt+".response_headers_to_add"),
	r(R+".responseHeaders.add*", Routes, "", rt+".response_headers_to_add"),
	r(R+".responseHeaders.remove", Routes, "", rt+".response_headers_to_remove"),
	r(R+".rewrite.hostname", Routes, "", rt+".route.host_rewrite_literal"),
	// A full path, and a prefix replaced by whole segments (the route's SegmentPrefix match), are a regex_rewrite.
	r(R+".rewrite.path*", Routes, "", rt+".route.prefix_rewrite|"+rt+".route.regex_rewrite"),
	r(R+".redirect.scheme", Routes, "", rt+".redirect.scheme_redirect"),
	r(R+".redirect.hostname", Routes, "", rt+".redirect.host_redirect"),
	r(R+".redirect.port", Routes, "", rt+".redirect.port_redirect"),
	// A prefix replaced by whole segments (the route's SegmentPrefix match) is a regex_rewrite.
	r(R+".redirect.path*", Routes, "", rt+".redirect.path_redirect|"+rt+".redirect.prefix_rewrite|"+rt+".redirect.regex_rewrite"),
	// 302 is Envoy's default (FOUND).
	opt(R+".redirect.statusCode", Routes, "", rt+".redirect.response_code"),
	r(R+".directResponse.status", Routes, "", rt+".direct_response.status"),
	r(R+".directResponse.body", Routes, "", rt+".direct_response.body.inline_string"),
	// A weighted_clusters entry naming no cluster, answered with cluster_not_found_response_code
	// INTERNAL_SERVER_ERROR; 0 adds none.
	opt(R+".errorWeight", Routes, "", rt+".route.weighted_clusters.clusters[name="+ir.ErrorCluster+"].weight"),
	r(R+".rateLimit.requests", Routes, "", rrl+"token_bucket.tokens_per_fill"),
	r(R+".rateLimit.burst", Routes, "", rrl+"token_bucket.max_tokens"),
	r(R+".rateLimit.interval", Routes, "", rrl+"token_bucket.fill_interval"),
	r(R+".rateLimit.perClient.requests", Routes, "", rrl+"descriptors[0].token_bucket.tokens_per_fill"),
	r(R+".rateLimit.perClient.burst", Routes, "", rrl+"descriptors[0].token_bucket.max_tokens"),
	r(R+".rateLimit.perClient.interval", Routes, "", rrl+"descriptors[0].token_bucket.fill_interval"),
	r(R+".rateLimit.perClient.maxClients", Routes, "", rrl+"max_dynamic_descriptors"),
	opt(R+".rateLimit.headers", Routes, "", rrl+"enable_x_ratelimit_headers"),
	opt(R+".mirrors*", Routes, "", rt+".route.request_mirror_policies"),
	opt(R+".retry.avoidPreviousPriorities", Routes, "", rt+".route.retry_policy.retry_priority"),

	r(B+".name", Cluster, cl, "name"),
	r(E+".address", Endpoints, cl, lbe+".endpoint.address.socket_address.address"),
	r(E+".port", Endpoints, cl, lbe+".endpoint.address.socket_address.port_value"),
	r(E+".weight", Endpoints, cl, lbe+".load_balancing_weight"),
	opt(E+".state", Endpoints, cl, lbe+".health_status"),
	r(E+".zone", Endpoints, cl, "endpoints[*].locality.zone"),
	r(E+".backup", Endpoints, cl, "endpoints[*].priority"),
	opt(B+".service.*", Endpoints, cl, "endpoints[*].lb_endpoints[*].endpoint.address.socket_address"),
	r(B+".connectTimeout", Cluster, cl, "connect_timeout"),
	// Set only on backends a route with sessionPersistence sends to.
	opt(B+".drainingSessions", Cluster, cl, "common_lb_config.override_host_status"),
	r(B+".loadBalancing.algorithm", Cluster, cl, "load_balancing_policy.policies[0].typed_extension_config.name"),
	r(B+".loadBalancing.leastRequest.choiceCount", Cluster, cl, lbTC+".choice_count"),
	r(B+".loadBalancing.ringHash.minimumRingSize", Cluster, cl, lbTC+".minimum_ring_size"),
	r(B+".loadBalancing.ringHash.maximumRingSize", Cluster, cl, lbTC+".maximum_ring_size"),
	r(B+".loadBalancing.maglev.tableSize", Cluster, cl, lbTC+".table_size"),
	r(B+".loadBalancing.hashKeys*", Routes, "", "virtual_hosts[name={vhost}].routes[*].route.hash_policy"),
	// On a TCP listener, which has no routes.
	r(B+".loadBalancing.hashKeys*", Listener, "{listener}", nf("envoy.filters.network.tcp_proxy", "hash_policy")),
	r(B+".loadBalancing.slowStart.window", Cluster, cl, lbTC+".slow_start_config.slow_start_window"),
	r(B+".loadBalancing.slowStart.aggression", Cluster, cl, lbTC+".slow_start_config.aggression.default_value"),
	r(B+".loadBalancing.slowStart.minWeightPercent", Cluster, cl, lbTC+".slow_start_config.min_weight_percent.value"),
	r(B+".loadBalancing.zoneFailover", Endpoints, cl, "endpoints[*].priority"),
	r(B+".loadBalancing.zoneAware.minEndpoints", Cluster, cl, lbTC+".locality_lb_config.zone_aware_lb_config.force_local_zone.min_size"),
	r(B+".loadBalancing.zoneWeights*", Endpoints, cl, "endpoints[*].load_balancing_weight"),
	r(B+".circuitBreakers.maxConnections", Cluster, cl, cb+".max_connections"),
	r(B+".circuitBreakers.maxPendingRequests", Cluster, cl, cb+".max_pending_requests"),
	r(B+".circuitBreakers.maxRequests", Cluster, cl, cb+".max_requests"),
	r(B+".circuitBreakers.maxRetries", Cluster, cl, cb+".max_retries"),
	r(B+".circuitBreakers.maxConnectionsPerEndpoint", Cluster, cl, "circuit_breakers.per_host_thresholds[0].max_connections"),
	r(B+".circuitBreakers.retryBudget.percent", Cluster, cl, cb+".retry_budget.budget_percent.value"),
	r(B+".circuitBreakers.retryBudget.minConcurrency", Cluster, cl, cb+".retry_budget.min_retry_concurrency"),
	r(B+".healthCheck.panicThreshold", Cluster, cl, "common_lb_config.healthy_panic_threshold.value"),
	r(B+".healthCheck.active.type", Cluster, cl, hc+".http_health_check|"+hc+".tcp_health_check|"+hc+".grpc_health_check"),
	r(B+".healthCheck.active.interval", Cluster, cl, hc+".interval"),
	r(B+".healthCheck.active.timeout", Cluster, cl, hc+".timeout"),
	opt(B+".healthCheck.active.jitter", Cluster, cl, hc+".interval_jitter"),
	r(B+".healthCheck.active.healthyThreshold", Cluster, cl, hc+".healthy_threshold"),
	r(B+".healthCheck.active.unhealthyThreshold", Cluster, cl, hc+".unhealthy_threshold"),
	r(B+".healthCheck.active.port", Endpoints, cl, ep+".health_check_config.port_value"),
	r(B+".healthCheck.active.http.path", Cluster, cl, hc+".http_health_check.path"),
	r(B+".healthCheck.active.http.method", Cluster, cl, hc+".http_health_check.method"),
	r(B+".healthCheck.active.http.host", Cluster, cl, hc+".http_health_check.host"),
	r(B+".healthCheck.active.http.expectedStatuses*", Cluster, cl, hc+".http_health_check.expected_statuses"),
	r(B+".healthCheck.active.http.expectedBody", Cluster, cl, hc+".http_health_check.receive"),
	r(B+".healthCheck.active.tcp.send", Cluster, cl, hc+".tcp_health_check.send"),
	r(B+".healthCheck.active.tcp.receive", Cluster, cl, hc+".tcp_health_check.receive"),
	opt(B+".healthCheck.active.grpc.serviceName", Cluster, cl, hc+".grpc_health_check.service_name"),
	r(B+".healthCheck.passive.consecutive5xx", Cluster, cl, od+".consecutive_5xx"),
	r(B+".healthCheck.passive.consecutiveGatewayErrors", Cluster, cl, od+".consecutive_gateway_failure"),
	r(B+".healthCheck.passive.consecutiveLocalOriginFailures", Cluster, cl, od+".consecutive_local_origin_failure"),
	r(B+".healthCheck.passive.successRate.stdevFactor", Cluster, cl, od+".success_rate_stdev_factor"),
	r(B+".healthCheck.passive.successRate.minimumHosts", Cluster, cl, od+".success_rate_minimum_hosts"),
	r(B+".healthCheck.passive.successRate.requestVolume", Cluster, cl, od+".success_rate_request_volume"),
	r(B+".healthCheck.passive.failurePercentage.threshold", Cluster, cl, od+".failure_percentage_threshold"),
	r(B+".healthCheck.passive.failurePercentage.minimumHosts", Cluster, cl, od+".failure_percentage_minimum_hosts"),
	r(B+".healthCheck.passive.failurePercentage.requestVolume", Cluster, cl, od+".failure_percentage_request_volume"),
	r(B+".healthCheck.passive.interval", Cluster, cl, od+".interval"),
	r(B+".healthCheck.passive.baseEjectionTime", Cluster, cl, od+".base_ejection_time"),
	r(B+".healthCheck.passive.maxEjectionPercent", Cluster, cl, od+".max_ejection_percent"),
	off(B+".healthCheck.passive.disabled", Cluster, cl, od),
	r(B+".loadBalancing.hashBalanceFactor", Cluster, cl, lbTC+".consistent_hashing_lb_config.hash_balance_factor"),
	r(B+".loadBalancing.failoverThreshold", Endpoints, cl, "policy.overprovisioning_factor"),
	opt(B+".connection.protocol", Cluster, cl, "typed_extension_protocol_options.*.explicit_http_config"),
	r(B+".connection.maxRequestsPerConnection", Cluster, cl, hpo+".max_requests_per_connection"),
	r(B+".connection.idleTimeout", Cluster, cl, hpo+".idle_timeout"),
	r(B+".connection.tcpKeepalive*", Cluster, cl, "upstream_connection_options.tcp_keepalive"),
	r(B+".connection.bufferBytes", Cluster, cl, "per_connection_buffer_limit_bytes"),
	// The second path is for a TLS socket inside the upstream PROXY protocol one (backends[].proxyProtocol).
	r(B+".tls.sni", Cluster, cl, "transport_socket.typed_config.sni|transport_socket.typed_config.transport_socket.typed_config.sni"),
	r(B+".tls.caFile", Cluster, cl, utls+".validation_context_sds_secret_config.name|transport_socket.typed_config."+utls+".validation_context_sds_secret_config.name"),
	off(B+".tls.insecureSkipVerify", Cluster, cl, utls),
	opt(B+".proxyProtocol.version", Cluster, cl, "transport_socket.typed_config.config.version"),
	opt(B+".perEndpointStats", Cluster, cl, "track_cluster_stats.per_endpoint_stats"),
	r(B+".loadBalancing.leastRequest.activeRequestBias", Cluster, cl, lbTC+".active_request_bias.default_value"),
	r(B+".loadBalancing.backendUtilization.blackoutPeriod", Cluster, cl, lbTC+".blackout_period"),
	r(B+".loadBalancing.backendUtilization.weightUpdatePeriod", Cluster, cl, lbTC+".weight_update_period"),
	r(B+".loadBalancing.backendUtilization.weightExpirationPeriod", Cluster, cl, lbTC+".weight_expiration_period"),
	r(B+".loadBalancing.backendUtilization.errorUtilizationPenalty", Cluster, cl, lbTC+".error_utilization_penalty"),
	r(B+".connection.maxConnectionDuration", Cluster, cl, hpo+".max_connection_duration"),
	r(B+".healthCheck.passive.maxEjectionTime", Cluster, cl, od+".max_ejection_time"),
	opt(B+".healthCheck.passive.alwaysEjectOneEndpoint", Cluster, cl, od+".always_eject_one_host"),
	opt(E+".hostname", Endpoints, cl, lbe+".endpoint.hostname"),
	opt(B+".tls.autoSNI", Cluster, cl, "transport_socket.typed_config.auto_host_sni|"+inner+"auto_host_sni"),
	r(B+".tls.clientCertificate.*", Cluster, cl, "transport_socket.typed_config."+ctc+"|"+inner+ctc),
}

// Mapping is a policy field's place in Envoy, as its rule says.
type Mapping struct {
	// Resource is the Envoy resource's type: Listener, RouteConfiguration, Cluster or
	// ClusterLoadAssignment; empty with None.
	Resource string
	// Paths are the field's paths in the resource, in Envoy's field names, each tried in turn.
	Paths []string
	// Optional fields are left unset while the policy keeps Envoy's default.
	Optional bool
	// Off: the field, when true, leaves the Envoy field out.
	Off bool
	// None says why the field sets no Envoy field.
	None string
}

// FieldMappings returns the mappings written for a policy field itself (spec.backends[].connectTimeout,
// spec.routes[0].match.path), not those it takes from a field above it: one, or one per resource type the
// field may end up in (a hash key is a route's, or on a TCP listener its tcp_proxy's), the first first.
func FieldMappings(path string) []Mapping {
	key, _ := fieldKey(strings.ReplaceAll(path, "[]", "[0]"))
	var out []Mapping
	for _, ru := range rules {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(ru.field, "*"), "."), "[]")
		switch {
		case ru.field != key && base != key:
		case ru.none != "":
			out = append(out, Mapping{None: ru.none})
		default:
			out = append(out, Mapping{Resource: ru.typ, Paths: strings.Split(ru.path, "|"), Optional: ru.optional && !ru.off, Off: ru.off})
		}
	}
	return out
}
