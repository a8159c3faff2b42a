// Package pushapi is the HTTP API lbctl talks to in standalone mode: push (all or nothing), list, get and
// delete policies, and see the connected proxies. Every call but the health checks needs a bearer token: the
// read-only token reads (list, get, status, proxies, explain, diff, predictions), the admin token also writes (push,
// delete, certificates).
package pushapi

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/addrlimit"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/healthhistory"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/rollout"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// MaxBodyBytes bounds one push: many policies, far fewer than this.
const MaxBodyBytes = 8 << 20

// Outcome of one policy in a push.
const (
	Created    = apiwire.Created
	Configured = apiwire.Configured
	Unchanged  = apiwire.Unchanged
	Deleted    = apiwire.Deleted
)

// The wire types live in apiwire so that clients link none of the server; these names stay for the
// server's callers.
type (
	ApplyResult   = apiwire.ApplyResult
	AppliedPolicy = apiwire.AppliedPolicy
	ErrorBody     = apiwire.ErrorBody
	DiffResult    = apiwire.DiffResult
)

// Server serves the API.
type Server struct {
	Store   store.Store
	Engine  *engine.Engine
	Tracker *xdsserver.Tracker
	// Token is the admin token: every call.
	Token string
	// ReadOnlyToken may only read: a dashboard or a monitoring script must not be able to change the load
	// balancer. Empty disables it.
	ReadOnlyToken string
	Log           *slog.Logger
	// Metrics, when set, counts requests by route and status code.
	Metrics *metrics.Metrics
	// Health, when set, is what the Envoys report of each backend.
	Health func() proxystats.Health
	// HealthByProxy, when set, is each Envoy's own report, by node id (GET .../live).
	HealthByProxy func() map[string]proxystats.Health
	// History, when set, keeps the health events and series (GET /v1/events, GET .../history; history.go).
	History *healthhistory.Recorder
	// IssueCert, when set, issues Envoys' xDS client certificates (certs.go).
	IssueCert CertIssuer
	// Identities, when set, issues Envoys their certificates against a platform credential (identity.go).
	Identities *Identities
	// Guard, when set, revokes Envoy identities (revoke.go); nil when xDS runs without client certificates.
	Guard *xdsserver.Guard
	// ReadOnly, when set, refuses pushes and deletes with this message (Kubernetes mode).
	ReadOnly string
	// RateLimit is how many calls per second each token may make, and each client address without a good
	// token (burst: twice as many); 0 means no limit. A wrong token draws on its address's bucket, so
	// guessing is throttled, and never on a good token's: a flood of wrong tokens from the address the
	// host's own lbctl uses does not starve it.
	RateLimit float64
	// PushWait bounds how long a push's reply waits for the Envoys of the groups it changed to acknowledge
	// it (see xdsserver.Tracker.Lagging); the reply names those that had not. 0 answers at once.
	PushWait time.Duration
	// Settings are the server's settings that depart from the secure defaults (GET /v1/version, lbctl
	// status).
	Settings []string
	// StoreStatus, when set, is this replica's view of a store shared by several replicas (GET /v1/version).
	StoreStatus func() *apiwire.StoreStatus
	// AllProxies, when set, is every replica's Envoys (a store shared by several replicas): a policy's status
	// counts the fleet's, so that every replica shows the same. Unset: this replica's (Tracker.Proxies).
	AllProxies func() []xdsserver.ProxyStatus

	// Rollouts, when set, runs staged rollouts (rollout.go); RolloutDefault is the mode of a push that names
	// none.
	Rollouts       *rollout.Controller
	RolloutDefault string

	// transitions keeps the conditions' real transition times across reads and restarts (conditions.go);
	// writingTimes is set while they are written to the store.
	transitions  policystatus.Transitions
	writingTimes atomic.Bool

	// overrides serialises changes of the endpoint overrides (overrides.go).
	overrides overrideState

	admitOnce sync.Once
	admit     *Admission
	limits    addrlimit.Limiter
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("POST /v1/policies", s.auth(s.apply))
	mux.Handle("GET /v1/policies", s.authRead(s.list))
	mux.Handle("GET /v1/policies/{namespace}/{name}", s.authRead(s.get))
	mux.Handle("DELETE /v1/policies/{namespace}/{name}", s.auth(s.delete))
	mux.Handle("GET /v1/proxies", s.authRead(s.proxies))
	mux.Handle("GET /v1/version", s.authRead(s.version))
	// A diff changes nothing: it is a read that happens to need a body.
	mux.Handle("POST /v1/diff", s.authRead(s.diff))
	mux.Handle("GET /v1/policies/{namespace}/{name}/explain", s.authRead(s.explain))
	mux.Handle("POST /v1/certificates", s.auth(s.issueCert)) // admin token only: it can mint any Envoy's identity
	mux.Handle("GET /v1/policies/{namespace}/{name}/live", s.authRead(s.live))
	mux.Handle("POST /v1/revocations", s.auth(s.revoke)) // admin token only, as issuing is
	mux.Handle("GET /v1/revocations", s.authRead(s.revocations))
	// An Envoy pod's own credential (its service account token), not an lbplane token: identity.go.
	mux.HandleFunc("POST /v1/identity", s.identity)
	mux.Handle("GET /v1/events", s.authRead(s.events))
	mux.Handle("GET /v1/policies/{namespace}/{name}/history", s.authRead(s.history))
	mux.Handle("GET /v1/policies/{namespace}/{name}/rollout", s.authRead(s.rolloutStatus))
	mux.Handle("POST /v1/policies/{namespace}/{name}/rollout/{action}", s.auth(s.rolloutAction))
	s.predictRoutes(mux)  // trace, whatif and traffic previews (predict.go)
	s.overrideRoutes(mux) // endpoint drain and maintenance (overrides.go)
	return s.Metrics.Instrument(mux)
}

// Role is what a token may do.
type Role int

const (
	// RoleNone is no token, or a wrong one.
	RoleNone Role = iota
	// RoleReadOnly reads.
	RoleReadOnly
	// RoleAdmin reads and writes.
	RoleAdmin
)

// RoleOf returns the role of an Authorization header. Both tokens are always compared, in constant time, so
// the answer's timing tells nothing about either token.
func RoleOf(authorization, admin, readOnly string) Role {
	got := []byte(authorization)
	isAdmin := admin != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+admin)) == 1
	isRead := readOnly != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+readOnly)) == 1
	switch {
	case isAdmin:
		return RoleAdmin
	case isRead:
		return RoleReadOnly
	}
	return RoleNone
}

// Credential names the token a role was proved with, for its rate limit bucket; "" for none.
func (r Role) Credential() string {
	switch r {
	case RoleAdmin:
		return "admin token"
	case RoleReadOnly:
		return "read-only token"
	}
	return ""
}

// auth lets only the admin token through: pushes, deletes, certificates.
func (s *Server) auth(h http.HandlerFunc) http.Handler { return s.authRole(RoleAdmin, h) }

// authRead lets the read-only and the admin token through.
func (s *Server) authRead(h http.HandlerFunc) http.Handler { return s.authRole(RoleReadOnly, h) }

func (s *Server) authRole(need Role, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := RoleOf(r.Header.Get("Authorization"), s.Token, s.ReadOnlyToken)
		if !s.limits.AllowFor(r, role.Credential(), s.RateLimit) {
			w.Header().Set("Retry-After", "1")
			writeErr(w, http.StatusTooManyRequests, "too many requests; slow down")
			return
		}
		switch {
		case role == RoleNone:
			w.Header().Set("WWW-Authenticate", `Bearer realm="lbplane"`)
			writeErr(w, http.StatusUnauthorized, "missing or wrong bearer token")
		case role < need:
			writeErr(w, http.StatusForbidden, "this token is read-only: pushes, deletes and certificates need the admin token (<data-dir>/token)")
		default:
			h(w, r)
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// maxErrors bounds the errors one answer lists; the rest are counted. (A push is at most
// manifest.MaxDocuments documents, each with its own errors: tens of thousands of lines nobody reads.)
const maxErrors = 100

func writeErr(w http.ResponseWriter, code int, errs ...string) {
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Sprintf("... and %d more errors", len(errs)-maxErrors))
	}
	writeJSON(w, code, ErrorBody{Errors: errs})
}

// readPush reads a push's body, refusing it (and answering) when too big or when pushes are not taken here.
func (s *Server) readPush(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	// Read into one buffer of the announced size, not one that doubles as it fills (twice the garbage).
	buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), MaxBodyBytes)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			releaseRefused(len(body))
			return nil, false
		}
		writeErr(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return nil, false
	}
	if s.ReadOnly != "" {
		writeErr(w, http.StatusConflict, s.ReadOnly)
		return nil, false
	}
	return body, true
}

// apply accepts every document of the body or none of them.
func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readPush(w, r)
	if !ok {
		return
	}
	dryRun := r.URL.Query().Get("dryRun") == "true"
	mode := r.URL.Query().Get("rollout")
	if mode != "" && mode != rollout.ModeStaged && mode != rollout.ModeImmediate {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("rollout: must be %q or %q, got %q", rollout.ModeStaged, rollout.ModeImmediate, mode))
		return
	}
	res, groups, code, errs := s.admission().apply(body, dryRun, mode)
	if len(errs) > 0 {
		writeErr(w, code, errs...)
		if code == http.StatusRequestEntityTooLarge {
			releaseRefused(len(body))
		}
		return
	}
	// The reply waits a bounded time for the Envoys to take the change, and names those that had not: a
	// slow Envoy delays neither the others (each takes its own steps) nor the reply beyond PushWait.
	if s.PushWait > 0 && len(groups) > 0 && s.Tracker != nil {
		lagging := s.Tracker.Lagging(r.Context(), groups, s.PushWait)
		if res.LaggingTotal = len(lagging); res.LaggingTotal > 0 {
			res.Lagging = lagging[:min(len(lagging), apiwire.MaxLagging)]
			s.Log.Info("push answered before every Envoy acknowledged it", "lagging", res.Lagging, "count", res.LaggingTotal, "wait", s.PushWait)
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// diff answers what pushing the body would change in Envoy's resources, without changing anything.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readPush(w, r)
	if !ok {
		return
	}
	res, code, errs := s.admission().Diff(body)
	if errs != nil {
		writeErr(w, code, errs...)
		if code == http.StatusRequestEntityTooLarge {
			releaseRefused(len(body))
		}
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// explain answers how one policy went through the pipeline, down to the Envoy fields.
func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	e, err := s.Explain(k)
	switch {
	case errors.Is(err, ErrNotFound):
		writeErr(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeErr(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, e)
	}
}

// ErrNotFound is returned for a policy that does not exist.
var ErrNotFound = errors.New("not found")

// Explain explains the policy k, as GET .../explain does.
func (s *Server) Explain(k objkey.Key) (*explain.Explanation, error) {
	res, origin := s.Engine.Result()
	var p *v1alpha1.LoadBalancerPolicy
	for _, x := range s.Engine.Policies(origin[k]) {
		if objkey.Of(x) == k {
			p = x
		}
	}
	pr := res.Policies.Of(k)
	if p == nil || pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	// The resources as they are served, decoded one by one: nothing is built again.
	return explain.Policy(p, pr, res, s.Engine.Resource)
}

// views returns every policy with its live status.
func (s *Server) views() []*v1alpha1.LoadBalancerPolicy { return s.viewsOf(nil) }

// viewsOf is views of the policies keep keeps (every one when nil).
func (s *Server) viewsOf(keep func(*v1alpha1.LoadBalancerPolicy) bool) []*v1alpha1.LoadBalancerPolicy {
	res, origin := s.Engine.Result()
	proxies := s.Tracker.Proxies
	if s.AllProxies != nil {
		proxies = s.AllProxies
	}
	fleet := proxies()
	var health proxystats.Health
	if s.Health != nil {
		health = s.Health()
	}
	now := metav1.NewTime(time.Now().UTC())
	var out []*v1alpha1.LoadBalancerPolicy
	for _, src := range []string{engine.SourceKubernetes, engine.SourceConfigDir, engine.SourceStore} {
		for _, p := range s.Engine.Policies(src) {
			k := objkey.Of(p)
			if origin[k] != src || (keep != nil && !keep(p)) {
				continue
			}
			v := *p
			if v.Namespace == "" {
				v.Namespace = v1alpha1.DefaultNamespace
			}
			v.Annotations = mergeAnnotation(v.Annotations, "lbplane.io/source", src)
			if pr := res.Policies.Of(k); pr != nil {
				v.Status = policystatus.Compute(pr, fleet, health, now)
				if s.Rollouts != nil {
					policystatus.WithRollout(&v.Status, s.Rollouts.Status(k), now)
				}
				s.transitions.Keep(k, v.Status.Conditions)
			}
			out = append(out, &v)
		}
	}
	s.transitions.Forget(func(k objkey.Key) bool { return res.Policies.Of(k) != nil })
	s.storeConditionTimes()
	slices.SortFunc(out, func(a, b *v1alpha1.LoadBalancerPolicy) int { return store.CompareKeys(objkey.Of(a), objkey.Of(b)) })
	return out
}

func mergeAnnotation(in map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(in)+1)
	for a, b := range in {
		out[a] = b
	}
	out[k] = v
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	var items []*v1alpha1.LoadBalancerPolicy
	if gw := r.URL.Query().Get("gateway"); gw != "" {
		// The policies a Gateway became (namespace/name), without the status of every other.
		items = s.viewsOf(func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Annotations[gatewayapi.AnnotationGateway] == gw })
	} else {
		items = s.views()
	}
	if items == nil {
		items = []*v1alpha1.LoadBalancerPolicy{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "LoadBalancerPolicyList", "items": items})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	for _, v := range s.views() {
		if objkey.Of(v) == k {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	writeErr(w, http.StatusNotFound, fmt.Sprintf("policy %s not found", k))
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if s.ReadOnly != "" {
		writeErr(w, http.StatusConflict, s.ReadOnly)
		return
	}
	if code, err := s.admission().Delete(k); err != nil {
		writeErr(w, code, err.Error())
		return
	}
	s.Log.Info("policy deleted", "policy", k.String())
	s.dropOverrides(k)
	writeJSON(w, http.StatusOK, ApplyResult{Policies: []AppliedPolicy{{Namespace: k.Namespace, Name: k.Name, Outcome: Deleted}}})
}

func (s *Server) proxies(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Tracker.Proxies())
}

// Views returns every policy with its live status, as GET /v1/policies does.
func (s *Server) Views() []*v1alpha1.LoadBalancerPolicy { return s.views() }

// LiveResult and ProxyLive are the wire types of GET .../live (see apiwire).
type (
	LiveResult = apiwire.LiveResult
	ProxyLive  = apiwire.ProxyLive
)

// Live returns the policy k's per-Envoy view; the summed part is its status's backends.
func (s *Server) Live(k objkey.Key) (*LiveResult, error) {
	res, _ := s.Engine.Result()
	pr := res.Policies.Of(k)
	if pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	out := &LiveResult{Policy: k.String(), Backends: []v1alpha1.BackendStatus{}, Proxies: []ProxyLive{}}
	now := metav1.NewTime(time.Now().UTC())
	if s.Health != nil {
		out.Backends = orEmpty(policystatus.Compute(pr, nil, s.Health(), now).Backends)
	}
	if s.HealthByProxy != nil {
		for node, h := range s.HealthByProxy() {
			if bs := policystatus.Compute(pr, nil, h, now).Backends; len(bs) > 0 {
				out.Proxies = append(out.Proxies, ProxyLive{NodeID: node, Backends: bs})
			}
		}
	}
	slices.SortFunc(out.Proxies, func(a, b ProxyLive) int { return strings.Compare(a.NodeID, b.NodeID) })
	if pr.Accepted {
		// What a prediction of this policy reads of the fleet, for one made elsewhere (lbctl diff --traffic of
		// Gateway API objects, which translates them itself).
		if down, err := s.downs(res.IR, k, s.health(), nil); err == nil && len(down) > 0 {
			out.Down = down
		}
		if zones := s.envoyZones(pr.ProxyGroup); len(zones) > 0 {
			out.EnvoysByZone = zones
		}
	}
	return out, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	l, err := s.Live(objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
	if err != nil {
		writeErr(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
}
