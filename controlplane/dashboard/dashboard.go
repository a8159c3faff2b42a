// Package dashboard serves lbplane's web dashboard on the push API's port: every policy with its
// conditions, a live chart of the per-endpoint spread (server-sent events, every second), endpoint health
// and ejections as they happen, each Envoy's sync state, and a policy's YAML with the Envoy resources it
// became. It reads what the push API reads, behind the same tokens: a token is exchanged once for a
// session cookie (login form, or ?token= redirecting to a clean URL), so no secret stays in a URL.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no build step, nothing fetched at run
// time); the chart is drawn as SVG by the page itself.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/addrlimit"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Prefix is where the dashboard lives on the API port.
const Prefix = "/dashboard/"

//go:embed assets
var assets embed.FS

// Server serves the dashboard.
type Server struct {
	// Token and ReadOnlyToken are the push API's; either logs in (the dashboard only reads).
	Token, ReadOnlyToken string
	// Policies returns every policy with its live status (the push API's GET /v1/policies).
	Policies func() []*v1alpha1.LoadBalancerPolicy
	// Proxies returns the connected Envoys with their sync state.
	Proxies func(context.Context) []xdsserver.ProxyStatus
	// Explain and Live answer for one policy as the push API's .../explain and .../live do.
	Explain func(objkey.Key) (*explain.Explanation, error)
	Live    func(objkey.Key) (*pushapi.LiveResult, error)
	// History answers a policy's health events and series over the last hour (the push API's .../history);
	// nil when stats are not read.
	History func(objkey.Key) (*pushapi.HistoryResult, error)
	// EndpointState drains an endpoint or puts it under maintenance (the push API's handler of
	// .../endpoint-state; nil when overrides are not kept). Only a session of the admin token reaches it.
	EndpointState http.HandlerFunc
	// Interval between two server-sent events (a second when 0).
	Interval time.Duration
	// RateLimit is token checks per second per good token, and per client address for the others (the push
	// API's --api-rate-limit, see addrlimit); 0 means no limit.
	RateLimit float64
	Log       *slog.Logger

	sessions sessions
	cacheMu  sync.Mutex
	cache    cached
	// limits throttles token checks per client address, as the push API does.
	limits addrlimit.Limiter
}

var loginTemplate = template.Must(template.ParseFS(assets, "assets/login.html"))

// Handler serves everything under Prefix.
func (s *Server) Handler() http.Handler {
	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", s.index)
	mux.HandleFunc("POST "+Prefix+"login", s.postLogin)
	mux.HandleFunc("POST "+Prefix+"logout", s.postLogout)
	mux.HandleFunc("POST "+Prefix+"login-code", s.postCode)
	// The script and style hold no data: they load before login too.
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"api/state", s.requireSession(s.state))
	mux.HandleFunc("GET "+Prefix+"api/policies/{namespace}/{name}", s.requireSession(s.policy))
	mux.HandleFunc("GET "+Prefix+"api/events", s.requireSession(s.events))
	mux.HandleFunc("GET "+Prefix+"api/history/{namespace}/{name}", s.requireSession(s.history))
	mux.HandleFunc("POST "+Prefix+"api/policies/{namespace}/{name}/endpoint-state", s.requireAdmin(s.endpointState))
	return securityHeaders(mux)
}

// securityHeaders: scripts and styles only from the dashboard itself (no inline script can run, should
// some data ever reach the page unescaped), no framing, no caching of data, and no Referer to another site
// (one could carry a ?token=).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// index serves the app to a session, exchanges ?token= (or a one-time ?code=) for one, or shows the login
// form.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("token") || q.Has("code") {
		role := pushapi.RoleNone
		if q.Has("token") {
			role = s.tokenRole(q.Get("token"))
		}
		if !s.limits.AllowFor(r, role.Credential(), s.RateLimit) {
			tooMany(w)
			return
		}
		if q.Has("code") {
			// A code is used up when tried: tried only once the address's or token's bucket allows.
			role = s.sessions.useCode(q.Get("code"), time.Now())
		}
		if role == pushapi.RoleNone {
			s.loginPage(w, http.StatusUnauthorized, "wrong token")
			return
		}
		s.login(w, r, role)
		return
	}
	if s.role(r) == pushapi.RoleNone {
		s.loginPage(w, http.StatusOK, "")
		return
	}
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

func (s *Server) loginPage(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	loginTemplate.Execute(w, map[string]string{"Error": msg})
}

// State is what every event carries: the whole picture, small enough to send each second.
type State struct {
	Time time.Time `json:"time"`
	// CanChange is true for a session of the admin token: the page offers drain, maintenance and ready.
	CanChange bool                         `json:"canChange"`
	Policies  []PolicySummary              `json:"policies"`
	Proxies   []xdsserver.ProxyStatus      `json:"proxies"`
	Live      *pushapi.LiveResult          `json:"live,omitempty"`
	Policy    *v1alpha1.LoadBalancerPolicy `json:"-"`
}

// PolicySummary is one policy in the list: its conditions and counts, not its backends (the selected
// policy's are in Live), so that an event stays small with many policies.
type PolicySummary struct {
	Namespace string                            `json:"namespace"`
	Name      string                            `json:"name"`
	Group     string                            `json:"group"`
	Status    v1alpha1.LoadBalancerPolicyStatus `json:"status"`
	// Algorithms names each backend's algorithm, for the skew hint.
	Algorithms map[string]v1alpha1.Algorithm `json:"algorithms"`
	// Traffic sums the policy's backends (nil before the Envoys' stats were read).
	Traffic *PolicyTraffic `json:"traffic,omitempty"`
	// Gateway says what a Gateway's policy serves (nil for a LoadBalancerPolicy).
	Gateway *GatewaySummary `json:"gateway,omitempty"`
}

// GatewaySummary is what a Gateway's policy serves: the Gateway (namespace/name), the listener port, the
// host name ("" for every name no other policy of the port serves) and the listeners.
type GatewaySummary struct {
	Gateway   string   `json:"gateway"`
	Port      int32    `json:"port"`
	Hostname  string   `json:"hostname"`
	Listeners []string `json:"listeners,omitempty"`
}

// PolicyTraffic is a policy's backends summed over their windows: requests, responses by class and the
// share of them that were 5xx, connections open, and bytes.
type PolicyTraffic struct {
	Requests          int64                   `json:"requests"`
	WindowSeconds     int32                   `json:"windowSeconds"`
	Responses         v1alpha1.ResponseCounts `json:"responses"`
	ClientErrorRate   *float64                `json:"clientErrorRate,omitempty"`
	ConnectionsActive int64                   `json:"connectionsActive"`
	BytesReceived     int64                   `json:"bytesReceived"`
	BytesSent         int64                   `json:"bytesSent"`
}

// trafficOf sums a policy's backends; nil without any reading.
func trafficOf(st *v1alpha1.LoadBalancerPolicyStatus) *PolicyTraffic {
	if len(st.Backends) == 0 {
		return nil
	}
	t := &PolicyTraffic{}
	for _, b := range st.Backends {
		t.Requests += b.Requests
		t.WindowSeconds = max(t.WindowSeconds, b.WindowSeconds)
		if r := b.Responses; r != nil {
			t.Responses.Informational += r.Informational
			t.Responses.Success += r.Success
			t.Responses.Redirection += r.Redirection
			t.Responses.ClientError += r.ClientError
			t.Responses.ServerError += r.ServerError
		}
		if c := b.Connections; c != nil {
			t.ConnectionsActive += c.Active
		}
		if by := b.Bytes; by != nil {
			t.BytesReceived += by.Received
			t.BytesSent += by.Sent
		}
	}
	if n := t.Responses.Total(); n > 0 {
		f := float64(t.Responses.ServerError) / float64(n)
		t.ClientErrorRate = &f
	}
	return t
}

// cacheFor is how long the policies and proxies read for one event serve the next ones: every open page
// asks four times a second, and computing every policy's status is not free with many policies.
const cacheFor = 200 * time.Millisecond

type cached struct {
	at       time.Time
	policies []*v1alpha1.LoadBalancerPolicy
	proxies  []xdsserver.ProxyStatus
}

// read returns the policies and proxies, at most cacheFor old.
func (s *Server) read(ctx context.Context) ([]*v1alpha1.LoadBalancerPolicy, []xdsserver.ProxyStatus) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if time.Since(s.cache.at) > cacheFor {
		s.cache = cached{at: time.Now(), policies: s.Policies(), proxies: s.Proxies(ctx)}
	}
	return s.cache.policies, s.cache.proxies
}

// snapshot is the state the page shows; selected is the ?policy= of the request ("namespace/name"), and a
// value that is not a key selects nothing.
func (s *Server) snapshot(ctx context.Context, selected string) State {
	selectedKey, selectable := objkey.Parse(selected)
	policies, proxies := s.read(ctx)
	st := State{Time: time.Now().UTC(), Policies: []PolicySummary{}, Proxies: proxies}
	if st.Proxies == nil {
		st.Proxies = []xdsserver.ProxyStatus{}
	}
	for _, p := range policies {
		// The group in effect, defaults applied, is the server's (status.proxyGroup).
		ps := PolicySummary{Namespace: p.Namespace, Name: p.Name, Group: p.Status.ProxyGroup,
			Status: v1alpha1.LoadBalancerPolicyStatus{Conditions: p.Status.Conditions, Endpoints: p.Status.Endpoints, Proxies: p.Status.Proxies,
				Rollout: p.Status.Rollout, EndpointOverrides: p.Status.EndpointOverrides},
			Algorithms: map[string]v1alpha1.Algorithm{}, Traffic: trafficOf(&p.Status)}
		for _, b := range p.Spec.Backends {
			ps.Algorithms[b.Name] = b.LoadBalancing.Algorithm
		}
		if sv, ok := gatewayapi.ServedBy(p); ok {
			ps.Gateway = &GatewaySummary{Gateway: sv.Gateway.String(), Port: sv.Port, Hostname: sv.Hostname, Listeners: sv.Listeners}
		}
		st.Policies = append(st.Policies, ps)
		if selectable && objkey.Of(p) == selectedKey {
			st.Policy = p
		}
	}
	if st.Policy != nil {
		if l, err := s.Live(selectedKey); err == nil {
			st.Live = l
		}
	}
	return st
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	st := s.snapshot(r.Context(), r.URL.Query().Get("policy"))
	st.CanChange = s.role(r) == pushapi.RoleAdmin && s.EndpointState != nil
	writeJSON(w, st)
}

// PolicyDetail is a policy's YAML (as stored, without status) and what it became in Envoy.
type PolicyDetail struct {
	YAML    string               `json:"yaml"`
	Explain *explain.Explanation `json:"explain,omitempty"`
	Error   string               `json:"error,omitempty"`
}

func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	for _, p := range s.Policies() {
		if objkey.Of(p) != k {
			continue
		}
		doc := struct {
			APIVersion string                          `json:"apiVersion"`
			Kind       string                          `json:"kind"`
			Metadata   map[string]any                  `json:"metadata"`
			Spec       v1alpha1.LoadBalancerPolicySpec `json:"spec"`
		}{v1alpha1.APIVersion, "LoadBalancerPolicy", map[string]any{"name": p.Name, "namespace": p.Namespace}, p.Spec}
		if len(p.Labels) > 0 {
			doc.Metadata["labels"] = p.Labels
		}
		y, err := yaml.Marshal(doc)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		d := PolicyDetail{YAML: string(y)}
		if d.Explain, err = s.Explain(k); err != nil {
			d.Error = err.Error()
		}
		writeJSON(w, d)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, "{\"errors\":[%q]}\n", "policy "+k.String()+" not found")
}

// healthCheckEvery is how often an event stream looks for a change of health or sync state, which it sends
// at once rather than at the next Interval: an ejection shows as soon as lbplane has read it from Envoy.
const healthCheckEvery = 250 * time.Millisecond

// events streams the state every Interval, and at once when health or sync state changes, until the client
// goes or its session ends.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	interval := s.Interval
	if interval <= 0 {
		interval = time.Second
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	selected := r.URL.Query().Get("policy")
	t := time.NewTicker(min(healthCheckEvery, interval))
	defer t.Stop()
	var sent time.Time
	lastHealth := ""
	for {
		st := s.snapshot(r.Context(), selected)
		st.CanChange = s.role(r) == pushapi.RoleAdmin && s.EndpointState != nil
		if h := healthOf(st); h != lastHealth || time.Since(sent) >= interval {
			lastHealth, sent = h, time.Now()
			// The API server's write timeout is for calls, not streams: each event gets its own deadline.
			if err := rc.SetWriteDeadline(time.Now().Add(10 * interval)); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			b, err := json.Marshal(st)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", b); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if s.role(r) == pushapi.RoleNone {
			return // logged out or expired
		}
	}
}

// healthOf sums up what the page logs as events: the selected policy's endpoints not taking traffic and
// why, each policy's conditions, and each Envoy's sync state.
func healthOf(st State) string {
	var b strings.Builder
	if st.Live != nil {
		for _, be := range st.Live.Backends {
			for _, e := range be.PerEndpoint {
				if e.EjectedOn > 0 {
					fmt.Fprintf(&b, "%s %s %d %v\n", be.Name, e.Address, e.EjectedOn, e.Reasons)
				}
			}
		}
	}
	for _, p := range st.Policies {
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "%s/%s %s %s %s\n", p.Namespace, p.Name, c.Type, c.Status, c.Reason)
		}
		for _, o := range p.Status.EndpointOverrides {
			fmt.Fprintf(&b, "%s/%s %s %s %s\n", p.Namespace, p.Name, o.Backend, o.Endpoint, o.State)
		}
	}
	for _, px := range st.Proxies {
		fmt.Fprintf(&b, "%s %s %s\n", px.NodeID, px.State, px.Message)
	}
	return b.String()
}

// history answers a policy's health events and series, kept by the server: a reload, or another browser,
// shows the same hour.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if s.History == nil {
		writeJSON(w, pushapi.HistoryResult{Policy: k.String(), Events: []pushapi.HealthEvent{}, Backends: []apiwire.BackendSeries{}})
		return
	}
	h, err := s.History(k)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "{\"errors\":[%q]}\n", err.Error())
		return
	}
	writeJSON(w, h)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
