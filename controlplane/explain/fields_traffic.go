package explain

// Rules of the traffic features (rate limits, mirrors, PROXY protocol, client certificates,
// utilization-aware balancing and the smaller balancing knobs).
func init() {
	const (
		ppl   = "listener_filters[name=envoy.filters.listener.proxy_protocol]"
		nrl   = "envoy.filters.network.local_ratelimit"
		ctc   = "common_tls_context.tls_certificate_sds_secret_configs[*].name"
		inner = "transport_socket.typed_config.transport_socket.typed_config."
		// A route's local rate limit, among its per-filter configs.
		rrl = rt + ".typed_per_filter_config.*."
	)
	// accessLog is a field of the listener's access log, on the HTTP connection manager or tcp_proxy.
	accessLog := func(field string) string {
		return hcmField("access_log[0]"+field) + "|" + nf("envoy.filters.network.tcp_proxy", "access_log[0]"+field)
	}
	rules = append(rules,
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
	)
}
