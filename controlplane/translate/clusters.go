package translate

import (
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

func clusterName(p *v1alpha1.LoadBalancerPolicy, backend string) string {
	return objkey.Cluster(objkey.Of(p), backend)
}

// mergeClusters builds one cluster over the endpoints of a weighted route's backends, each endpoint weighted
// by its backend's share of the route and its own share of the backend. The stateful session filter can only
// pin a client to an endpoint of the cluster the router picked, and the router picks weighted clusters at
// random, so a client pinned across backends needs them to be one cluster; new clients still follow the
// route's weights through weighted round robin. The endpoints of a backend at weight 0 are retired: they
// keep the sessions they have and get no new client. The first backend's settings apply to the merged
// cluster.
func mergeClusters(name string, wcs []ir.WeightedCluster, byName map[string]*ir.Cluster) *ir.Cluster {
	first := *byName[wcs[0].Name]
	merged := &first
	merged.Name = name
	merged.Endpoints = nil
	for _, wc := range wcs {
		c := byName[wc.Name]
		var sum uint64
		for _, e := range c.Endpoints {
			sum += uint64(e.Weight)
		}
		weight := uint64(wc.Weight)
		if weight == 0 {
			// A level of their own: the weights only share that level's sessions-only traffic out.
			weight = 1
		}
		for _, e := range c.Endpoints {
			e.Retired = wc.Weight == 0
			// Scaled so that the backend's endpoints add up to its route weight (times 1000 for precision).
			w := max(weight*uint64(e.Weight)*1000/max(sum, 1), 1)
			e.Weight = uint32(min(w, 1<<31))
			merged.Endpoints = append(merged.Endpoints, e)
		}
	}
	return merged
}

// builtCluster is a cluster and the hash keys its policy asks routes to use.
type builtCluster struct {
	*ir.Cluster
	HashKeysFromPolicy []ir.HashKey
	// DNSMissing and DNSForbidden say which host names are not resolved, and which of their addresses
	// were left out (see dnsCluster).
	DNSMissing, DNSForbidden []string
}

func cluster(p *v1alpha1.LoadBalancerPolicy, b *v1alpha1.Backend, refs Refs) builtCluster {
	cb := b.CircuitBreakers
	cl := &ir.Cluster{
		Name:           clusterName(p, b.Name),
		Algorithm:      ir.Algorithm(b.LoadBalancing.Algorithm),
		ConnectTimeout: b.ConnectTimeout.Duration,
		CircuitBreakers: ir.CircuitBreakers{
			MaxConnections:     uint32(*cb.MaxConnections),
			MaxPendingRequests: uint32(*cb.MaxPendingRequests),
			MaxRequests:        uint32(*cb.MaxRequests),
			MaxRetries:         uint32(*cb.MaxRetries),
		},
	}
	if cb.MaxConnectionsPerEndpoint != nil {
		cl.CircuitBreakers.MaxConnectionsPerEndpoint = uint32(*cb.MaxConnectionsPerEndpoint)
	}
	if rb := cb.RetryBudget; rb != nil {
		cl.CircuitBreakers.RetryBudget = &ir.RetryBudget{Percent: float64(*rb.Percent), MinConcurrency: uint32(*rb.MinConcurrency)}
	}
	lb := &b.LoadBalancing
	if lr := lb.LeastRequest; lr != nil {
		cl.ChoiceCount = uint32(*lr.ChoiceCount)
	}
	if rh := lb.RingHash; rh != nil {
		cl.RingHash = &ir.RingHashSize{Min: uint64(*rh.MinimumRingSize), Max: uint64(*rh.MaximumRingSize)}
	} else if lb.Algorithm == v1alpha1.AlgorithmRingHash {
		var weight uint64
		for _, e := range b.Endpoints {
			weight += uint64(*e.Weight)
		}
		size := min(max(weight*v1alpha1.RingEntriesPerWeight, 1), v1alpha1.DefaultMaxRingSize)
		cl.RingHash = &ir.RingHashSize{Min: size, Max: v1alpha1.DefaultMaxRingSize}
	}
	if mg := lb.Maglev; mg != nil {
		cl.MaglevTableSize = uint64(*mg.TableSize)
	}
	if f := lb.HashBalanceFactor; f != nil {
		cl.HashBalanceFactor = uint32(*f)
	}
	if t := lb.FailoverThreshold; t != nil {
		// Envoy spills from a level once healthy share x factor drops below 100 %.
		cl.OverprovisioningFactor = uint32(math.Round(10000 / float64(*t)))
	}
	if ss := lb.SlowStart; ss != nil {
		agg, _ := strconv.ParseFloat(ss.Aggression, 64)
		cl.SlowStart = &ir.SlowStart{Window: ss.Window.Duration, Aggression: agg, MinWeightPercent: float64(*ss.MinWeightPercent)}
	}
	if len(lb.ZoneFailover) > 0 {
		cl.ZoneFailover = slices.Clone(lb.ZoneFailover)
	}
	zones(lb, cl)
	var keys []ir.HashKey
	for _, k := range lb.HashKeys {
		keys = append(keys, hashKey(k))
	}
	passive := v1alpha1.DefaultPassive()
	if hc := b.HealthCheck; hc != nil {
		if hc.PanicThreshold != nil {
			v := float64(*hc.PanicThreshold)
			cl.PanicThreshold = &v
		}
		cl.HealthCheck = healthCheck(hc.Active)
		if hc.Passive != nil {
			passive = hc.Passive
		}
	}
	cl.Outlier = outlier(passive)
	cl.BufferBytes = clusterBufferBytes(b)
	if c := b.Connection; c != nil {
		cl.HTTP2 = c.Protocol == v1alpha1.UpstreamHTTP2
		if c.MaxRequestsPerConnection != nil {
			cl.MaxRequestsPerConnection = uint32(*c.MaxRequestsPerConnection)
		}
		if c.IdleTimeout != nil {
			d := c.IdleTimeout.Duration
			cl.IdleTimeout = &d
		}
		if k := c.TCPKeepalive; k != nil {
			ka := &ir.TCPKeepalive{}
			if k.Time != nil {
				ka.Time = k.Time.Duration
			}
			if k.Interval != nil {
				ka.Interval = k.Interval.Duration
			}
			if k.Probes != nil {
				ka.Probes = uint32(*k.Probes)
			}
			cl.TCPKeepalive = ka
		}
	}
	if t := b.TLS; t != nil {
		cl.TLS = &ir.UpstreamTLS{SNI: t.SNI}
		if !t.InsecureSkipVerify {
			cl.TLS.CASecret = caSecretName(cl.Name)
		}
	}
	for _, e := range b.Endpoints {
		ep := ir.Endpoint{Address: e.Address, Port: uint32(e.Port), Weight: uint32(*e.Weight), Draining: e.State == v1alpha1.EndpointDraining, Zone: e.Zone, Backup: e.Backup, Hostname: e.Hostname}
		probed(cl, b, &ep)
		cl.Endpoints = append(cl.Endpoints, ep)
	}
	missing, forbidden := dnsCluster(cl, p, b, refs)
	if b.HealthCheck == nil || b.HealthCheck.Passive == nil {
		cl.Outlier.MaxEjectionPercent = defaultEjectionCap(cl.Endpoints)
	}
	clusterOptions(cl, b)
	if cl.Outlier != nil && sameOutlier(cl.Outlier, defaultOutlier) {
		// Almost every cluster has the default ejection: they share one (the IR is not modified once
		// built), instead of 80 bytes and three counters each.
		cl.Outlier = defaultOutlier
	}
	return builtCluster{Cluster: cl, HashKeysFromPolicy: keys, DNSMissing: missing, DNSForbidden: forbidden}
}

// probed gives an endpoint of cl, listed or found through a Service, what its active health checks need:
// the probe port, and for HTTP and gRPC probes without a host of their own, the endpoint's own address as
// Host (or authority). Probes test the endpoint, not a virtual host, so they never carry one of the
// hostnames the policy serves; left to Envoy, the Host would be the cluster name, "namespace/policy/backend",
// which HTTP servers such as Go's reject with 400, failing every probe.
func probed(cl *ir.Cluster, b *v1alpha1.Backend, ep *ir.Endpoint) {
	hc := cl.HealthCheck
	if hc == nil {
		return
	}
	if a := b.HealthCheck.Active; a.Port != nil {
		ep.HealthCheckPort = uint32(*a.Port)
	}
	if (hc.Type == ir.HealthHTTP && hc.Host == "") || hc.Type == ir.HealthGRPC {
		port := ep.Port
		if ep.HealthCheckPort != 0 {
			port = ep.HealthCheckPort
		}
		ep.HealthCheckHost = net.JoinHostPort(ep.Address, strconv.Itoa(int(port)))
	}
}

// defaultOutlier is the ejection of a backend without healthCheck.passive and without backup endpoints.
// Shared by every cluster that has it: never modified.
var defaultOutlier = func() *ir.Outlier {
	o := outlier(v1alpha1.DefaultPassive())
	o.MaxEjectionPercent = defaultEjectionCap(nil)
	return o
}()

// sameOutlier compares two ejections by value, every field (a field added to ir.Outlier is compared too).
func sameOutlier(a, b *ir.Outlier) bool { return reflect.DeepEqual(a, b) }

func hashKey(k v1alpha1.HashKey) ir.HashKey {
	out := ir.HashKey{Terminal: k.Terminal}
	switch {
	case k.SourceIP != nil:
		out.SourceIP = true
	case k.Header != nil:
		out.Header = strings.ToLower(k.Header.Name)
	case k.QueryParameter != nil:
		out.QueryParameter = k.QueryParameter.Name
	case k.Path != nil:
		out.Header, out.StripQuery = ":path", !k.Path.WithQuery
	case k.Host != nil:
		out.Header = ":authority"
	case k.Cookie != nil:
		ck := &ir.CookieKey{Name: k.Cookie.Name}
		if g := k.Cookie.Generate; g != nil {
			ck.Generate, ck.TTL, ck.Path, ck.Secure, ck.SameSite = true, g.TTL.Duration, g.Path, g.Secure, string(g.SameSite)
		}
		out.Cookie = ck
	}
	return out
}

func healthCheck(a *v1alpha1.ActiveHealthCheck) *ir.HealthCheck {
	if a == nil {
		return nil
	}
	hc := &ir.HealthCheck{Type: string(a.Type), Interval: a.Interval.Duration, Timeout: a.Timeout.Duration, Jitter: a.Jitter.Duration,
		Healthy: uint32(*a.HealthyThreshold), Unhealthy: uint32(*a.UnhealthyThreshold)}
	switch {
	case a.HTTP != nil && a.Type == v1alpha1.HealthCheckHTTP:
		hc.Path, hc.Method, hc.Host, hc.Body = a.HTTP.Path, a.HTTP.Method, a.HTTP.Host, a.HTTP.ExpectedBody
		for _, r := range a.HTTP.ExpectedStatuses {
			hc.Statuses = append(hc.Statuses, [2]int64{int64(r.Start), int64(r.End) + 1})
		}
	case a.TCP != nil:
		hc.Send, hc.Receive = a.TCP.Send, a.TCP.Receive
	case a.GRPC != nil:
		hc.Service = a.GRPC.ServiceName
	}
	return hc
}

func outlier(p *v1alpha1.PassiveHealthCheck) *ir.Outlier {
	if p == nil || p.Disabled {
		return nil
	}
	u32 := func(v *int32) *uint32 {
		if v == nil {
			return nil
		}
		x := uint32(*v)
		return &x
	}
	o := &ir.Outlier{Consecutive5xx: u32(p.Consecutive5xx), ConsecutiveGateway: u32(p.ConsecutiveGatewayErrors),
		ConsecutiveLocalOrigin: u32(p.ConsecutiveLocalOriginFailures), Interval: p.Interval.Duration,
		BaseEjectionTime: p.BaseEjectionTime.Duration, MaxEjectionPercent: uint32(*p.MaxEjectionPercent)}
	if sr := p.SuccessRate; sr != nil {
		f, _ := strconv.ParseFloat(sr.StdevFactor, 64)
		o.SuccessRate = &ir.SuccessRate{StdevFactor: uint32(math.Round(f * 1000)), MinimumHosts: uint32(*sr.MinimumHosts), RequestVolume: uint32(*sr.RequestVolume)}
	}
	if fp := p.FailurePercentage; fp != nil {
		o.FailurePercentage = &ir.FailurePercentage{Threshold: uint32(*fp.Threshold), MinimumHosts: uint32(*fp.MinimumHosts), RequestVolume: uint32(*fp.RequestVolume)}
	}
	return o
}

// defaultEjectionCap is the max_ejection_percent of the default ejection (healthCheck.passive unset). Envoy
// counts it over every endpoint of the cluster, backups included, not per priority level (DetectorImpl::
// ejectHost in source/common/upstream/outlier_detection_impl.cc: "not currently checked per-priority
// level"). With the plain 50 %, two primaries and one backup could lose only one primary: the other one,
// dead but not ejected, kept its level at half health, which is 70 % of the traffic with Envoy's
// overprovisioning factor 1.4. A request then failed whenever its first try and both retries landed on it
// (previous_hosts re-picks 5 times, and every pick goes to that level with 70 %): about 1 request in 100,
// until the active checks failed the primary, and for good without them (TestBackupEndpoint). So with
// backups the cap is the primaries' share, rounded up: every primary can be ejected and the backups take
// the traffic, which is what they are for, while the last endpoint is never ejected (up to 100 endpoints).
// Backups are static endpoints only, so the cap changes only with the policy, never with a Service.
func defaultEjectionCap(eps []ir.Endpoint) uint32 {
	backups := 0
	for _, e := range eps {
		if e.Backup {
			backups++
		}
	}
	if backups == 0 {
		return v1alpha1.DefaultLocalOriginMaxEjectionPercent
	}
	primaries := len(eps) - backups
	share := (100*primaries + len(eps) - 1) / len(eps)
	return uint32(min(max(share, v1alpha1.DefaultLocalOriginMaxEjectionPercent), 99))
}

// allBackends spreads over every backend's cluster; names are the clusters' names in spec order, the
// strings the clusters hold (a name built again here was a second copy of each, per policy).
func allBackends(names []string) []ir.WeightedCluster {
	out := make([]ir.WeightedCluster, 0, len(names))
	for _, n := range names {
		out = append(out, ir.WeightedCluster{Name: n, Weight: 1})
	}
	return out
}

// hashKeysFor returns the hash keys a destination set needs: those of its first hashing cluster.
func hashKeysFor(wcs []ir.WeightedCluster, keys map[string][]ir.HashKey) []ir.HashKey {
	for _, wc := range wcs {
		if k, ok := keys[wc.Name]; ok {
			return k
		}
	}
	return nil
}

// clusterOptions adds a backend's PROXY protocol, per-endpoint stats, connection lifetime, balancing knobs
// and client certificate to its cluster.
func clusterOptions(cl *ir.Cluster, b *v1alpha1.Backend) {
	if pp := b.ProxyProtocol; pp != nil {
		cl.ProxyProtocol = string(pp.Version)
	}
	cl.PerEndpointStats = b.PerEndpointStats
	if c := b.Connection; c != nil && c.MaxConnectionDuration != nil {
		d := c.MaxConnectionDuration.Duration
		cl.MaxConnectionDuration = &d
	}
	lb := &b.LoadBalancing
	if lr := lb.LeastRequest; lr != nil && lr.ActiveRequestBias != "" {
		f, _ := strconv.ParseFloat(lr.ActiveRequestBias, 64)
		cl.ActiveRequestBias = &f
	}
	if bu := lb.BackendUtilization; bu != nil && lb.Algorithm == v1alpha1.AlgorithmBackendUtilization {
		pen, _ := strconv.ParseFloat(bu.ErrorUtilizationPenalty, 64)
		cl.Utilization = &ir.Utilization{BlackoutPeriod: bu.BlackoutPeriod.Duration, WeightUpdatePeriod: bu.WeightUpdatePeriod.Duration,
			WeightExpirationPeriod: bu.WeightExpirationPeriod.Duration, ErrorUtilizationPenalty: pen}
	}
	if hc := b.HealthCheck; hc != nil && hc.Passive != nil && cl.Outlier != nil {
		if d := hc.Passive.MaxEjectionTime; d != nil {
			cl.Outlier.MaxEjectionTime = d.Duration
		}
		cl.Outlier.AlwaysEjectOne = hc.Passive.AlwaysEjectOneEndpoint
	}
	if t := b.TLS; t != nil && t.ClientCertificate != nil && cl.TLS != nil {
		cl.TLS.ClientCertSecret = clientCertSecretName(cl.Name)
	}
	if t := b.TLS; t != nil && cl.TLS != nil {
		cl.TLS.AutoSNI = t.AutoSNI
	}
}
