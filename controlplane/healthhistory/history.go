// Package healthhistory keeps what the Envoys said of the endpoints' health over time, on the server: every
// ejection and recovery as an event (logged, kept in a bounded ring, served to lbctl events and the
// dashboard, and handed on, as Kubernetes Events in that mode), and each endpoint's requests and errors per
// second and each backend's p99 latency over the last hour. A page reload, or a second dashboard, sees the
// same history.
//
// It reads what the stats poller already summed up (each Envoy's own view, and all of them together); it
// never reads an Envoy itself.
package healthhistory

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
)

// Defaults of a Recorder's bounds.
const (
	DefaultEvents = 1000
	DefaultKeep   = time.Hour
	DefaultStep   = 10 * time.Second
	// DefaultSeries bounds how many endpoint series are kept at once (each at most Keep/Step points).
	DefaultSeries = 20000
)

// Owner is the policy and backend a group's cluster belongs to.
type Owner struct {
	Policy  objkey.Key
	Backend string
	// ActiveChecks is true when the backend has active health checks: then the end of an ejection is a
	// recovery; with passive checks only it shows nothing about the endpoint.
	ActiveChecks bool
}

// Recorder turns successive readings of the Envoys' reports into events and series. Safe for concurrent
// use; the zero value needs Owner set.
type Recorder struct {
	// Owner names the policy and backend of a group's cluster; false for a cluster no policy has.
	Owner func(group, cluster string) (Owner, bool)
	// Log, when set, gets one line per event.
	Log *slog.Logger
	// OnEvent, when set, is called with every event, outside the lock (Kubernetes Events).
	OnEvent func(apiwire.HealthEvent)
	// Yield, when set, is called every few hundred clusters an observation goes through, and may wait
	// (see proxystats.Poller.Yield).
	Yield func()
	// MaxEvents, Keep, Step and MaxSeries bound the history (the Default* values when 0).
	MaxEvents int
	Keep      time.Duration
	Step      time.Duration
	MaxSeries int

	mu      sync.Mutex
	ring    []apiwire.HealthEvent // oldest first, at most MaxEvents
	seq     uint64
	state   map[endpointKey]*endpointState
	eps     map[clusterEndpoint]*ring[apiwire.SeriesPoint]
	lat     map[groupCluster]*ring[apiwire.LatencyPoint]
	traffic map[groupCluster]*ring[apiwire.TrafficPoint]
	checks  map[clusterEndpoint]*checkState
	lastPut time.Time
	steps   proxystats.Steps
}

type groupCluster struct{ group, cluster string }

type clusterEndpoint struct {
	groupCluster
	addr string
}

type endpointKey struct {
	node string
	clusterEndpoint
}

// checkState is an endpoint's counted health over time: when lbplane last read it, and its spans of
// downtime (oldest first, at most maxDowntimes).
type checkState struct {
	last time.Time
	down []apiwire.Downtime
}

// maxDowntimes bounds the spans of downtime kept per endpoint; the oldest go first.
const maxDowntimes = 120

type endpointState struct {
	ejected bool
	reasons []string
	// unknownSince is when a passive-only ejection lapsed without anything showing the endpoint answers.
	unknownSince time.Time
}

// ring is a time series bounded by age.
type ring[T any] struct {
	points []T
	at     []time.Time
}

func (r *ring[T]) add(t time.Time, p T, keep time.Duration) {
	cut := 0
	for cut < len(r.at) && t.Sub(r.at[cut]) > keep {
		cut++
	}
	r.points, r.at = append(r.points[cut:], p), append(r.at[cut:], t)
}

func (r *ring[T]) newest() time.Time { return r.at[len(r.at)-1] }

func (r *Recorder) limits() (events int, keep, step time.Duration, series int) {
	events, keep, step, series = r.MaxEvents, r.Keep, r.Step, r.MaxSeries
	if events <= 0 {
		events = DefaultEvents
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	if step <= 0 {
		step = DefaultStep
	}
	if series <= 0 {
		series = DefaultSeries
	}
	return
}

// Observe takes one reading: byProxy is each Envoy's own view by node id (the poller's ByProxy), total the
// view of all of them (its Health). Events come from each Envoy's view, the series from the total.
func (r *Recorder) Observe(now time.Time, byProxy map[string]proxystats.Health, total proxystats.Health) {
	r.mu.Lock()
	r.steps.Yield = r.Yield
	events := r.observeHealth(now, byProxy)
	r.observeChecks(now, total)
	r.observeSeries(now, total)
	r.mu.Unlock()
	for _, e := range events {
		if r.Log != nil {
			r.Log.Info("endpoint "+strings.ToLower(e.Type), "policy", objkey.Key{Namespace: e.Namespace, Name: e.Policy}.String(), "backend", e.Backend,
				"endpoint", e.Endpoint, "envoy", e.Node, "group", e.Group, "reason", strings.Join(e.Reasons, "; "))
		}
		if r.OnEvent != nil {
			r.OnEvent(e)
		}
	}
}

func (r *Recorder) observeHealth(now time.Time, byProxy map[string]proxystats.Health) []apiwire.HealthEvent {
	if r.state == nil {
		r.state = map[endpointKey]*endpointState{}
	}
	var out []apiwire.HealthEvent
	emit := func(k endpointKey, typ string, reasons []string) {
		o, ok := r.Owner(k.group, k.cluster)
		if !ok {
			return
		}
		r.seq++
		out = append(out, apiwire.HealthEvent{Seq: r.seq, Time: now.UTC(), Type: typ, Namespace: o.Policy.Namespace, Policy: o.Policy.Name,
			Backend: o.Backend, Endpoint: k.addr, Node: k.node, Group: k.group, Reasons: reasons})
	}
	// lapsed: an Envoy sends to an ejected endpoint again. With passive checks only, and no request answered,
	// that shows nothing: the endpoint is unknown since now.
	lapsed := func(k endpointKey, st *endpointState, answered bool) {
		o, _ := r.Owner(k.group, k.cluster)
		if passiveOnly(st.reasons) && !o.ActiveChecks && !answered {
			st.unknownSince = now
			emit(k, apiwire.EventUnknown, []string{"outlier ejection lapsed; passive checks only: unknown until it answers a request"})
		} else {
			emit(k, apiwire.EventRecovered, nil)
		}
		st.ejected, st.reasons = false, nil
	}
	seen := map[endpointKey]bool{}
	for node, h := range byProxy {
		for group, clusters := range h {
			for cluster, b := range clusters {
				r.steps.Step()
				for _, e := range b.PerEndpoint {
					k := endpointKey{node, clusterEndpoint{groupCluster{group, cluster}, e.Address}}
					seen[k] = true
					st := r.state[k]
					if st == nil {
						st = &endpointState{}
						r.state[k] = st
					}
					switch ejected := e.EjectedOn > 0; {
					case ejected && (!st.ejected || !slices.Equal(st.reasons, e.Reasons)):
						emit(k, apiwire.EventEjected, e.Reasons)
						st.ejected, st.reasons, st.unknownSince = true, e.Reasons, time.Time{}
					case !ejected && st.ejected:
						lapsed(k, st, served(e))
					case !ejected && !st.unknownSince.IsZero() && served(e):
						st.unknownSince = time.Time{}
						emit(k, apiwire.EventRecovered, []string{"answered requests"})
					}
				}
			}
		}
	}
	for k, st := range r.state {
		if seen[k] {
			continue
		}
		b, reported := byProxy[k.node][k.group][k.cluster]
		if !reported || listsEveryEndpoint(b) {
			// The Envoy, the cluster or the endpoint is gone: its state goes with it, without an event.
			delete(r.state, k)
			continue
		}
		// Not listed in the Envoy's report of the cluster: it takes traffic there (every endpoint that does not
		// is listed, up to the bound).
		if st.ejected {
			lapsed(k, st, false)
		}
	}
	events, _, _, _ := r.limits()
	r.ring = append(r.ring, out...)
	if over := len(r.ring) - events; over > 0 {
		r.ring = slices.Delete(r.ring, 0, over)
	}
	return out
}

// listsEveryEndpoint tells whether a report lists all its endpoints: fewer taking traffic than the bound
// on the busiest listed (so one it does not list is no longer there).
func listsEveryEndpoint(b v1alpha1.BackendStatus) bool {
	taking := 0
	for _, e := range b.PerEndpoint {
		if e.EjectedOn == 0 {
			taking++
		}
	}
	return taking < proxystats.MaxBusiestListed
}

// passiveOnly tells whether every reason is outlier detection's (whose ejection lapses by time alone).
func passiveOnly(reasons []string) bool {
	if len(reasons) == 0 {
		return false
	}
	for _, x := range reasons {
		if !strings.HasPrefix(x, "outlier detection") {
			return false
		}
	}
	return true
}

// served tells whether an endpoint answered requests at the last reading without failing them all.
func served(e v1alpha1.EndpointStatus) bool {
	return e.RequestsPerSecond > 0 && (e.ErrorRate == nil || *e.ErrorRate < 1)
}

// observeChecks notes when each endpoint's counted health was read and the spans in which it was not
// Healthy. An endpoint a report leaves out takes traffic (every one that does not is listed), unless the
// report lists every endpoint: then it is gone, and its open span ends.
func (r *Recorder) observeChecks(now time.Time, total proxystats.Health) {
	_, keep, _, maxSeries := r.limits()
	if r.checks == nil {
		r.checks = map[clusterEndpoint]*checkState{}
	}
	up := func(c *checkState) {
		if n := len(c.down); n > 0 && c.down[n-1].To == nil {
			to := now.UTC()
			c.down[n-1].To = &to
		}
	}
	seen := map[clusterEndpoint]bool{}
	for group, clusters := range total {
		for cluster, b := range clusters {
			r.steps.Step()
			for _, e := range b.PerEndpoint {
				ce := clusterEndpoint{groupCluster{group, cluster}, e.Address}
				seen[ce] = true
				c := r.checks[ce]
				if c == nil {
					if len(r.checks) >= maxSeries {
						continue
					}
					c = &checkState{}
					r.checks[ce] = c
				}
				c.last = now
				// Drained by the operator or the spec (lbctl endpoint drain): not down.
				if e.Health == v1alpha1.EndpointHealthy || e.Health == "" || slices.Equal(e.Reasons, []string{"draining"}) {
					up(c)
					continue
				}
				if n := len(c.down); n == 0 || c.down[n-1].To != nil || c.down[n-1].Health != string(e.Health) {
					up(c)
					c.down = append(c.down, apiwire.Downtime{From: now.UTC(), Health: string(e.Health)})
					if len(c.down) > maxDowntimes {
						c.down = slices.Delete(c.down, 0, len(c.down)-maxDowntimes)
					}
				}
			}
		}
	}
	for ce, c := range r.checks {
		if seen[ce] {
			continue
		}
		if b, reported := total[ce.group][ce.cluster]; reported {
			if !listsEveryEndpoint(b) {
				c.last = now
			}
			up(c)
		}
		// Spans that ended before the kept hour go; so does an endpoint not read for that long.
		c.down = slices.DeleteFunc(c.down, func(d apiwire.Downtime) bool { return d.To != nil && now.Sub(*d.To) > keep })
		if now.Sub(c.last) > keep {
			delete(r.checks, ce)
		}
	}
}

func (r *Recorder) observeSeries(now time.Time, total proxystats.Health) {
	_, keep, step, maxSeries := r.limits()
	if now.Sub(r.lastPut) < step {
		return
	}
	r.lastPut = now
	if r.eps == nil {
		r.eps, r.lat = map[clusterEndpoint]*ring[apiwire.SeriesPoint]{}, map[groupCluster]*ring[apiwire.LatencyPoint]{}
		r.traffic = map[groupCluster]*ring[apiwire.TrafficPoint]{}
	}
	for group, clusters := range total {
		for cluster, b := range clusters {
			r.steps.Step()
			gc := groupCluster{group, cluster}
			if b.LatencyP99Ms != nil {
				l := r.lat[gc]
				if l == nil {
					l = &ring[apiwire.LatencyPoint]{}
					r.lat[gc] = l
				}
				l.add(now, apiwire.LatencyPoint{Time: now.UTC(), LatencyP99Ms: *b.LatencyP99Ms}, keep)
			}
			if p, ok := trafficPoint(now, b); ok {
				tr := r.traffic[gc]
				if tr == nil {
					tr = &ring[apiwire.TrafficPoint]{}
					r.traffic[gc] = tr
				}
				tr.add(now, p, keep)
			}
			for _, e := range b.PerEndpoint {
				ce := clusterEndpoint{gc, e.Address}
				s := r.eps[ce]
				if s == nil {
					if len(r.eps) >= maxSeries {
						continue
					}
					s = &ring[apiwire.SeriesPoint]{}
					r.eps[ce] = s
				}
				var eps float64
				if b.WindowSeconds > 0 {
					eps = float64(e.Errors) / float64(b.WindowSeconds)
				}
				s.add(now, apiwire.SeriesPoint{Time: now.UTC(), RequestsPerSecond: e.RequestsPerSecond, ErrorsPerSecond: eps}, keep)
			}
		}
	}
	for k, s := range r.eps {
		if now.Sub(s.newest()) > keep {
			delete(r.eps, k)
		}
	}
	for k, s := range r.lat {
		if now.Sub(s.newest()) > keep {
			delete(r.lat, k)
		}
	}
	for k, s := range r.traffic {
		if now.Sub(s.newest()) > keep {
			delete(r.traffic, k)
		}
	}
}

// trafficPoint is a backend's responses by class, connections and bytes at a reading, as rates over its
// window; false before a window of stats was read.
func trafficPoint(now time.Time, b v1alpha1.BackendStatus) (apiwire.TrafficPoint, bool) {
	if b.Connections == nil && b.Bytes == nil && b.Responses == nil {
		return apiwire.TrafficPoint{}, false
	}
	p := apiwire.TrafficPoint{Time: now.UTC(), ClientErrorRate: b.ClientErrorRate}
	w := float64(b.WindowSeconds)
	per := func(n int64) float64 {
		if w <= 0 {
			return 0
		}
		return float64(n) / w
	}
	if r := b.Responses; r != nil {
		p.Success, p.Redirection, p.ClientError, p.ServerError = per(r.Success), per(r.Redirection), per(r.ClientError), per(r.ServerError)
	}
	if c := b.Connections; c != nil {
		p.ConnectionsActive = c.Active
	}
	if by := b.Bytes; by != nil {
		p.BytesReceived, p.BytesSent = per(by.Received), per(by.Sent)
	}
	return p, true
}

// EventsSince returns the kept events after seq, oldest first, those of policy only when it is set.
func (r *Recorder) EventsSince(seq uint64, policy *objkey.Key) []apiwire.HealthEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []apiwire.HealthEvent{}
	for _, e := range r.ring {
		if e.Seq > seq && (policy == nil || (e.Namespace == policy.Namespace && e.Policy == policy.Name)) {
			out = append(out, e)
		}
	}
	return out
}

// Series returns the series of a group's clusters, named by backend (clusters maps cluster to backend),
// in the order of names.
func (r *Recorder) Series(group string, clusters map[string]string) []apiwire.BackendSeries {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []apiwire.BackendSeries{}
	for cluster, name := range clusters {
		gc := groupCluster{group, cluster}
		b := apiwire.BackendSeries{Name: name, LatencyP99: []apiwire.LatencyPoint{}, Traffic: []apiwire.TrafficPoint{}, Endpoints: []apiwire.EndpointSeries{}}
		if l := r.lat[gc]; l != nil {
			b.LatencyP99 = slices.Clone(l.points)
		}
		if tr := r.traffic[gc]; tr != nil {
			b.Traffic = slices.Clone(tr.points)
		}
		series := func(ce clusterEndpoint, s *ring[apiwire.SeriesPoint]) apiwire.EndpointSeries {
			es := apiwire.EndpointSeries{Address: ce.addr, Points: []apiwire.SeriesPoint{}, Downtime: []apiwire.Downtime{}}
			if s != nil {
				es.Points = slices.Clone(s.points)
			}
			if c := r.checks[ce]; c != nil {
				last := c.last.UTC()
				es.LastCheck, es.Downtime = &last, slices.Clone(c.down)
			}
			return es
		}
		for ce, s := range r.eps {
			if ce.groupCluster == gc {
				b.Endpoints = append(b.Endpoints, series(ce, s))
			}
		}
		for ce := range r.checks {
			if _, ok := r.eps[ce]; !ok && ce.groupCluster == gc {
				b.Endpoints = append(b.Endpoints, series(ce, nil))
			}
		}
		slices.SortFunc(b.Endpoints, func(x, y apiwire.EndpointSeries) int { return strings.Compare(x.Address, y.Address) })
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y apiwire.BackendSeries) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Annotate returns h with the endpoints marked whose passive-only ejection lapsed on more than half of the
// Envoys that have them without anything showing they answer: their health is Unknown (since when), not
// Healthy, and they are counted as unknown rather than healthy. h is not changed (the poller shares it):
// what is marked is copied.
func (r *Recorder) Annotate(h proxystats.Health) proxystats.Health {
	r.mu.Lock()
	defer r.mu.Unlock()
	type unknown struct {
		n     int32
		since time.Time
	}
	by := map[clusterEndpoint]*unknown{}
	for k, st := range r.state {
		if st.unknownSince.IsZero() {
			continue
		}
		u := by[k.clusterEndpoint]
		if u == nil {
			u = &unknown{since: st.unknownSince}
			by[k.clusterEndpoint] = u
		}
		u.n++
		if st.unknownSince.Before(u.since) {
			u.since = st.unknownSince
		}
	}
	out, copied := h, map[string]bool{}
	for ce, u := range by {
		b, ok := out[ce.group][ce.cluster]
		if !ok || 2*u.n <= b.Proxies {
			continue
		}
		if len(copied) == 0 {
			out = maps.Clone(h)
		}
		if !copied[ce.group] {
			out[ce.group], copied[ce.group] = maps.Clone(out[ce.group]), true
		}
		b.PerEndpoint = slices.Clone(b.PerEndpoint)
		since := metav1.NewTime(u.since.UTC())
		j := slices.IndexFunc(b.PerEndpoint, func(e v1alpha1.EndpointStatus) bool { return e.Address == ce.addr })
		if j < 0 {
			b.PerEndpoint = append(b.PerEndpoint, v1alpha1.EndpointStatus{Address: ce.addr, ReportedBy: b.Proxies})
			j = len(b.PerEndpoint) - 1
		}
		e := &b.PerEndpoint[j]
		if e.Health == v1alpha1.EndpointEjected {
			continue
		}
		e.Health, e.UnknownSince = v1alpha1.EndpointUnknown, &since
		b.Endpoints.Healthy--
		b.Endpoints.Unknown++
		out[ce.group][ce.cluster] = b
	}
	return out
}
