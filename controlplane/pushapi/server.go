// Package pushapi is the HTTP API lbctl talks to in standalone mode: push (all or nothing), list, get and
// delete policies, and see the connected proxies. Every call but the health checks needs a bearer token: the
// read-only token reads (list, get, status, proxies, explain, diff), the admin token also writes (push,
// delete, certificates).
package pushapi

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/policystatus"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/resdiff"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// MaxBodyBytes bounds one push: many policies, far fewer than this.
const MaxBodyBytes = 8 << 20

// Outcome of one policy in a push.
const (
	Created    = "created"
	Configured = "configured"
	Unchanged  = "unchanged"
	Deleted    = "deleted"
)

// ApplyResult answers a push.
type ApplyResult struct {
	Policies []AppliedPolicy `json:"policies"`
	DryRun   bool            `json:"dryRun,omitempty"`
}

// AppliedPolicy is one policy of a push.
type AppliedPolicy struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Outcome    string `json:"outcome"`
	Generation int64  `json:"generation"`
	// Warnings are lint findings: the policy is accepted, but probably does not do what is meant.
	Warnings []string `json:"warnings,omitempty"`
}

// ErrorBody is the body of every failed call.
type ErrorBody struct {
	Errors []string `json:"errors"`
}

// Server serves the API.
type Server struct {
	Store   *store.Store
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
	// IssueCert, when set, issues Envoys' xDS client certificates (certs.go).
	IssueCert CertIssuer
	// ReadOnly, when set, refuses pushes and deletes with this message (Kubernetes mode).
	ReadOnly string
	// RateLimit is how many calls per second one client address may make (burst: twice as many); 0 means
	// no limit. It applies before the token check, so guessing tokens is throttled too.
	RateLimit float64

	mu sync.Mutex // one write at a time: store and engine change together
	// decoded holds the policy decoded from each record last time, to reuse while the record is the same.
	// Guarded by mu.
	decoded  map[translate.Key]decodedPolicy
	limitMu  sync.Mutex
	limiters map[string]*rate.Limiter
}

// allow applies the per-address rate limit.
func (s *Server) allow(r *http.Request) bool {
	if s.RateLimit <= 0 {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if s.limiters == nil {
		s.limiters = map[string]*rate.Limiter{}
	}
	l, ok := s.limiters[host]
	if !ok {
		if len(s.limiters) > 10000 { // bound the memory an address scan can take
			clear(s.limiters)
		}
		l = rate.NewLimiter(rate.Limit(s.RateLimit), int(2*s.RateLimit)+1)
		s.limiters[host] = l
	}
	return l.Allow()
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
	// A diff changes nothing: it is a read that happens to need a body.
	mux.Handle("POST /v1/diff", s.authRead(s.diff))
	mux.Handle("GET /v1/policies/{namespace}/{name}/explain", s.authRead(s.explain))
	mux.Handle("POST /v1/certificates", s.auth(s.issueCert)) // admin token only: it can mint any Envoy's identity
	mux.Handle("GET /v1/policies/{namespace}/{name}/live", s.authRead(s.live))
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

// auth lets only the admin token through: pushes, deletes, certificates.
func (s *Server) auth(h http.HandlerFunc) http.Handler { return s.authRole(RoleAdmin, h) }

// authRead lets the read-only and the admin token through.
func (s *Server) authRead(h http.HandlerFunc) http.Handler { return s.authRole(RoleReadOnly, h) }

func (s *Server) authRole(need Role, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allow(r) {
			w.Header().Set("Retry-After", "1")
			writeErr(w, http.StatusTooManyRequests, "too many requests; slow down")
			return
		}
		role := RoleOf(r.Header.Get("Authorization"), s.Token, s.ReadOnlyToken)
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

func writeErr(w http.ResponseWriter, code int, errs ...string) {
	writeJSON(w, code, ErrorBody{Errors: errs})
}

// readPush reads a push's body, refusing it (and answering) when too big or when pushes are not taken here.
func (s *Server) readPush(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
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
	res, code, errs := s.Apply(body, dryRun)
	if len(errs) > 0 {
		writeErr(w, code, errs...)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// diff answers what pushing the body would change in Envoy's resources, without changing anything.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readPush(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	pl, code, errs := s.plan(body, true)
	s.mu.Unlock()
	if errs != nil {
		writeErr(w, code, errs...)
		return
	}
	changes, err := DiffResults(pl.before, pl.after)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	if changes == nil {
		changes = []resdiff.Change{}
	}
	writeJSON(w, http.StatusOK, DiffResult{Policies: pl.res.Policies, Changes: changes})
}

// explain answers how one policy went through the pipeline, down to the Envoy fields.
func (s *Server) explain(w http.ResponseWriter, r *http.Request) {
	k := translate.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
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
func (s *Server) Explain(k translate.Key) (*explain.Explanation, error) {
	res, origin := s.Engine.Result()
	var p *v1alpha1.LoadBalancerPolicy
	for _, x := range s.Engine.Policies(origin[k]) {
		if translate.KeyOf(x) == k {
			p = x
		}
	}
	pr := res.Policies[k]
	if p == nil || pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	return ExplainPolicy(p, pr, res)
}

// ExplainPolicy explains p, whose translation is pr within res.
func ExplainPolicy(p *v1alpha1.LoadBalancerPolicy, pr *translate.PolicyResult, res *translate.Result) (*explain.Explanation, error) {
	dp, _ := translate.Prepare(p)
	g := res.IR.Groups[dp.Spec.ProxyGroup]
	var built xdsbuild.Resources
	if g != nil {
		var err error
		if built, err = xdsbuild.Build(g); err != nil {
			return nil, err
		}
	}
	return explain.Explain(dp, pr, g, built)
}

// DiffResult answers POST /v1/diff.
type DiffResult struct {
	Policies []AppliedPolicy  `json:"policies"`
	Changes  []resdiff.Change `json:"changes"`
}

// DiffResults builds both translations' resources and compares them.
func DiffResults(before, after *translate.Result) ([]resdiff.Change, error) {
	b, err := xdsbuild.BuildAll(before.IR)
	if err != nil {
		return nil, err
	}
	a, err := xdsbuild.BuildAll(after.IR)
	if err != nil {
		return nil, err
	}
	return resdiff.Diff(b, a)
}

// plan is what a push would do: the outcome per policy, the records to write, and the translation before
// and after.
type plan struct {
	res           *ApplyResult
	puts          []*store.Record
	planned       *engine.Planned
	before, after *translate.Result
}

// Apply validates and stores the documents in body, all or nothing. It returns the HTTP status and every
// error when it refuses.
func (s *Server) Apply(body []byte, dryRun bool) (*ApplyResult, int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, code, errs := s.plan(body, dryRun)
	if errs != nil {
		return nil, code, errs
	}
	res, puts := pl.res, pl.puts
	if dryRun {
		return res, http.StatusOK, nil
	}
	if err := s.Store.Apply(puts, nil); err != nil {
		return nil, http.StatusInternalServerError, []string{"writing the store: " + err.Error()}
	}
	s.Engine.Commit(pl.planned)
	for _, p := range res.Policies {
		if p.Outcome != Unchanged {
			s.Log.Info("policy "+p.Outcome, "policy", p.Namespace+"/"+p.Name, "generation", p.Generation)
		}
	}
	return res, http.StatusOK, nil
}

// plan validates a push and works out what it would change; the caller holds s.mu.
func (s *Server) plan(body []byte, dryRun bool) (*plan, int, []string) {
	docs, err := manifest.Decode("request", bytes.NewReader(body))
	var errs []string
	if err != nil {
		errs = append(errs, splitJoined(err)...)
	}
	if len(docs) == 0 && err == nil {
		return nil, http.StatusBadRequest, []string{"the request holds no policy"}
	}
	pushed := map[translate.Key]manifest.Document{}
	var order []translate.Key
	for _, d := range docs {
		k := translate.KeyOf(d.Policy)
		if _, dup := pushed[k]; dup {
			errs = append(errs, fmt.Sprintf("%s: %s is in the request twice", d.Source, k))
			continue
		}
		if _, fe := translate.Prepare(d.Policy); len(fe) > 0 {
			for _, e := range fe {
				errs = append(errs, fmt.Sprintf("%s (%s): %s", k, d.Source, e.Error()))
			}
		}
		pushed[k] = d
		order = append(order, k)
	}
	if len(errs) > 0 {
		return nil, http.StatusUnprocessableEntity, errs
	}

	byKey, err := s.records()
	if err != nil {
		return nil, http.StatusInternalServerError, []string{"reading the store: " + err.Error()}
	}
	_, origin := s.Engine.Result()
	now := s.now()
	res := &ApplyResult{DryRun: dryRun}
	var puts []*store.Record
	for _, k := range order {
		if origin[k] == engine.SourceConfigDir {
			errs = append(errs, fmt.Sprintf("%s: managed by --config-dir; change its file instead", k))
			continue
		}
		d := pushed[k]
		old := byKey[k]
		rec := &store.Record{Namespace: k.Namespace, Name: k.Name, Document: d.Raw, Generation: 1, Created: now, Updated: now, UID: newUID()}
		outcome := Created
		if old != nil {
			rec.Created, rec.UID, rec.Generation = old.Created, old.UID, old.Generation
			outcome = Unchanged
			if !bytes.Equal(old.Document, d.Raw) {
				outcome = Configured
				if !sameSpec(old.Document, d.Raw) {
					rec.Generation++
				}
			} else {
				rec.Updated = old.Updated
			}
		}
		byKey[k] = rec
		if outcome != Unchanged {
			puts = append(puts, rec)
		}
		res.Policies = append(res.Policies, AppliedPolicy{Namespace: k.Namespace, Name: k.Name, Outcome: outcome, Generation: rec.Generation})
	}
	if len(errs) > 0 {
		return nil, http.StatusConflict, errs
	}
	candidate, err := s.policiesOf(byKey)
	if err != nil {
		return nil, http.StatusInternalServerError, []string{err.Error()}
	}
	// Conflicts: a pushed policy that would not be accepted, or an accepted one that this push would push out.
	before, _ := s.Engine.Result()
	planned := s.Engine.Plan(engine.SourceStore, candidate)
	after := planned.Result
	for _, k := range order {
		pr := after.Policies[k]
		switch {
		case pr == nil:
		case !pr.Accepted:
			errs = append(errs, fmt.Sprintf("%s: %s", k, pr.AcceptedMessage))
		case !pr.ResolvedRefs && pr.ResolvedRefsReason == translate.ReasonInvalidRef:
			// A certificate or CA that cannot be used would take the policy out of service; refuse the push
			// and keep the last good version serving.
			errs = append(errs, fmt.Sprintf("%s: %s", k, strings.TrimSuffix(pr.ResolvedRefsMessage, " (the policy is not served until this is fixed)")))
		}
	}
	for k, pr := range before.Policies {
		if _, ok := pushed[k]; ok || !pr.Accepted {
			continue
		}
		if now := after.Policies[k]; now != nil && !now.Accepted {
			errs = append(errs, fmt.Sprintf("%s would no longer be accepted: %s", k, now.AcceptedMessage))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, http.StatusConflict, errs
	}
	for i := range res.Policies {
		k := translate.Key{Namespace: res.Policies[i].Namespace, Name: res.Policies[i].Name}
		if pr := after.Policies[k]; pr != nil {
			res.Policies[i].Warnings = pr.Warnings
		}
	}
	return &plan{res: res, puts: puts, planned: planned, before: before, after: after}, http.StatusOK, nil
}

func (s *Server) now() time.Time {
	return time.Now().UTC()
}

func newUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sameSpec reports whether two documents have equal specs; metadata changes do not bump the generation.
func sameSpec(a, b []byte) bool {
	var pa, pb struct {
		Spec any `json:"spec"`
	}
	if json.Unmarshal(a, &pa) != nil || json.Unmarshal(b, &pb) != nil {
		return false
	}
	return reflect.DeepEqual(pa.Spec, pb.Spec)
}

func splitJoined(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

// PolicyOf decodes a stored record into a policy with its server-side metadata.
func PolicyOf(rec *store.Record) (*v1alpha1.LoadBalancerPolicy, error) {
	d, err := manifest.DecodeDocument(rec.Document)
	if err != nil {
		return nil, fmt.Errorf("stored policy %s no longer decodes: %w", rec.Key(), err)
	}
	p := d.Policy
	p.Namespace = rec.Namespace
	p.Generation = rec.Generation
	p.CreationTimestamp = metav1.NewTime(rec.Created)
	p.UID = types.UID(rec.UID)
	return p, nil
}

// decodedPolicy is a record's policy with the record fields PolicyOf read.
type decodedPolicy struct {
	document   []byte
	generation int64
	created    time.Time
	uid        string
	policy     *v1alpha1.LoadBalancerPolicy
}

func (d decodedPolicy) of(rec *store.Record) bool {
	return d.generation == rec.Generation && d.created.Equal(rec.Created) && d.uid == rec.UID && bytes.Equal(d.document, rec.Document)
}

// policiesOf decodes the records in key order, reusing what it decoded last time for records that have not
// changed: decoding every stored document again (YAML, then strict field checks) was 61 % of a push's CPU
// with 10,000 policies stored. The policies are shared, so nothing may modify them (translation copies what
// it changes). The caller holds s.mu.
func (s *Server) policiesOf(byKey map[translate.Key]*store.Record) ([]*v1alpha1.LoadBalancerPolicy, error) {
	out := make([]*v1alpha1.LoadBalancerPolicy, 0, len(byKey))
	next := make(map[translate.Key]decodedPolicy, len(byKey))
	for k, rec := range byKey {
		d, ok := s.decoded[k]
		if !ok || !d.of(rec) {
			p, err := PolicyOf(rec)
			if err != nil {
				return nil, err
			}
			d = decodedPolicy{document: rec.Document, generation: rec.Generation, created: rec.Created, uid: rec.UID, policy: p}
		}
		next[k] = d
		out = append(out, d.policy)
	}
	s.decoded = next
	slices.SortFunc(out, func(a, b *v1alpha1.LoadBalancerPolicy) int {
		return cmpKey(translate.KeyOf(a), translate.KeyOf(b))
	})
	return out, nil
}

func cmpKey(a, b translate.Key) int {
	switch {
	case a.String() < b.String():
		return -1
	case a.String() > b.String():
		return 1
	}
	return 0
}

// records returns the stored policies by key.
func (s *Server) records() (map[translate.Key]*store.Record, error) {
	records, err := s.Store.List()
	if err != nil {
		return nil, err
	}
	byKey := make(map[translate.Key]*store.Record, len(records))
	for _, rec := range records {
		byKey[translate.Key{Namespace: rec.Namespace, Name: rec.Name}] = rec
	}
	return byKey, nil
}

// Load reads the store into the engine; serve calls it before xDS is served.
func (s *Server) Load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	byKey, err := s.records()
	if err != nil {
		return err
	}
	ps, err := s.policiesOf(byKey)
	if err != nil {
		return err
	}
	s.Engine.Set(engine.SourceStore, ps)
	return nil
}

// views returns every policy with its live status.
func (s *Server) views() []*v1alpha1.LoadBalancerPolicy {
	res, origin := s.Engine.Result()
	proxies := s.Tracker.Proxies()
	var health proxystats.Health
	if s.Health != nil {
		health = s.Health()
	}
	now := metav1.NewTime(s.now())
	var out []*v1alpha1.LoadBalancerPolicy
	for _, src := range []string{engine.SourceKubernetes, engine.SourceConfigDir, engine.SourceStore} {
		for _, p := range s.Engine.Policies(src) {
			k := translate.KeyOf(p)
			if origin[k] != src {
				continue
			}
			v := *p
			if v.Namespace == "" {
				v.Namespace = v1alpha1.DefaultNamespace
			}
			v.Annotations = mergeAnnotation(v.Annotations, "lbplane.io/source", src)
			if pr := res.Policies[k]; pr != nil {
				v.Status = policystatus.Compute(pr, proxies, health, now)
			}
			out = append(out, &v)
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.LoadBalancerPolicy) int { return cmpKey(translate.KeyOf(a), translate.KeyOf(b)) })
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

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	items := s.views()
	if items == nil {
		items = []*v1alpha1.LoadBalancerPolicy{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "LoadBalancerPolicyList", "items": items})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	k := translate.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	for _, v := range s.views() {
		if translate.KeyOf(v) == k {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	writeErr(w, http.StatusNotFound, fmt.Sprintf("policy %s not found", k))
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	k := translate.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if s.ReadOnly != "" {
		writeErr(w, http.StatusConflict, s.ReadOnly)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, origin := s.Engine.Result(); origin[k] == engine.SourceConfigDir {
		writeErr(w, http.StatusConflict, fmt.Sprintf("%s: managed by --config-dir; remove its file instead", k))
		return
	}
	byKey, err := s.records()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	if _, ok := byKey[k]; !ok {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("policy %s not found", k))
		return
	}
	delete(byKey, k)
	candidate, err := s.policiesOf(byKey)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := s.Store.Apply(nil, []string{k.String()}); err != nil {
		writeErr(w, http.StatusInternalServerError, "writing the store: "+err.Error())
		return
	}
	s.Engine.Set(engine.SourceStore, candidate)
	s.Log.Info("policy deleted", "policy", k.String())
	writeJSON(w, http.StatusOK, ApplyResult{Policies: []AppliedPolicy{{Namespace: k.Namespace, Name: k.Name, Outcome: Deleted}}})
}

func (s *Server) proxies(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Tracker.Proxies())
}

// Views returns every policy with its live status, as GET /v1/policies does.
func (s *Server) Views() []*v1alpha1.LoadBalancerPolicy { return s.views() }

// LiveResult answers GET /v1/policies/{namespace}/{name}/live: the policy's backends as every Envoy of its
// group reports them, summed (as in status.backends) and per Envoy.
type LiveResult struct {
	Policy   string                   `json:"policy"`
	Backends []v1alpha1.BackendStatus `json:"backends"`
	Proxies  []ProxyLive              `json:"proxies"`
}

// ProxyLive is one Envoy's own view of a policy's backends.
type ProxyLive struct {
	NodeID   string                   `json:"nodeId"`
	Backends []v1alpha1.BackendStatus `json:"backends"`
}

// Live returns the policy k's per-Envoy view; the summed part is its status's backends.
func (s *Server) Live(k translate.Key) (*LiveResult, error) {
	res, _ := s.Engine.Result()
	pr := res.Policies[k]
	if pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	out := &LiveResult{Policy: k.String(), Backends: []v1alpha1.BackendStatus{}, Proxies: []ProxyLive{}}
	now := metav1.NewTime(s.now())
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
	return out, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	l, err := s.Live(translate.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
	if err != nil {
		writeErr(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
}
