package pushapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/proxystats"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Predictions (lbctl trace, whatif and diff --traffic) run here, on what the server serves: a policy's
// resources as published (decoded one by one, as explain reads them), the health its Envoys report, and
// the zones of the Envoys of its proxy group. Nothing but the policies asked about is modelled.

// maxPredictBody bounds a trace's or what-if's request: a few headers and selectors.
const maxPredictBody = 1 << 20

// predictRoutes adds the prediction calls to mux; each is a read.
func (s *Server) predictRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/policies/{namespace}/{name}/trace", s.authRead(answer(s.Trace)))
	mux.Handle("POST /v1/policies/{namespace}/{name}/whatif", s.authRead(answer(s.WhatIf)))
	// A traffic preview changes nothing: a read with the policies to preview as its body, as a diff.
	mux.Handle("POST /v1/traffic", s.authRead(s.traffic))
}

// predictError is a refused prediction: the HTTP status and what to tell.
type predictError struct {
	code int
	msgs []string
}

func (e *predictError) Error() string { return strings.Join(e.msgs, "; ") }

func refused(code int, format string, args ...any) error {
	return &predictError{code: code, msgs: []string{fmt.Sprintf(format, args...)}}
}

func writePredictErr(w http.ResponseWriter, err error) {
	var pe *predictError
	switch {
	case errors.As(err, &pe):
		writeErr(w, pe.code, pe.msgs...)
	case errors.Is(err, ErrNotFound):
		writeErr(w, http.StatusNotFound, err.Error())
	default:
		writeErr(w, http.StatusInternalServerError, err.Error())
	}
}

// readJSON decodes a prediction's request body into v; an empty body is the zero request.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPredictBody))
	if err != nil {
		return refused(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxPredictBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refused(http.StatusBadRequest, "reading the request: %v", err)
	}
	return nil
}

func keyOf(r *http.Request) objkey.Key {
	return objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
}

// answer serves a prediction about one policy: the request's JSON body, answered by f.
func answer[Req, Out any](f func(objkey.Key, Req) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		err := readJSON(w, r, &req)
		var out Out
		if err == nil {
			out, err = f(keyOf(r), req)
		}
		if err != nil {
			writePredictErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) traffic(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
		return
	}
	var zone *string
	if r.URL.Query().Has("zone") {
		z := r.URL.Query().Get("zone")
		zone = &z
	}
	pvs, err := s.Traffic(body, zone)
	if err != nil {
		writePredictErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, pvs)
}

// Trace follows one request through the policy k as it is served (POST .../trace).
func (s *Server) Trace(k objkey.Key, req apiwire.TraceRequest) (*pushclient.TraceAnswer, error) {
	if !strings.HasPrefix(req.Path, "/") {
		return nil, refused(http.StatusBadRequest, "path must start with /, got %q", req.Path)
	}
	if req.ClientIP != "" && net.ParseIP(req.ClientIP) == nil {
		return nil, refused(http.StatusBadRequest, "clientIP: %q is not an IP address", req.ClientIP)
	}
	sv, err := s.served(k, req.Zone)
	if err != nil {
		return nil, err
	}
	m, err := s.model(sv, k, req.Down)
	if err != nil {
		return nil, err
	}
	if err := joined(sv, k, m, req.Predict); err != nil {
		return nil, err
	}
	headers := map[string][]string{}
	for name, vs := range req.Headers {
		headers[strings.ToLower(name)] = append(headers[strings.ToLower(name)], vs...)
	}
	out := &pushclient.TraceAnswer{Trace: m.TraceRequest(trafficmodel.Request{Path: req.Path, Headers: headers, ClientIP: req.ClientIP})}
	_, origin := s.Engine.Result()
	for _, p := range s.Engine.Policies(origin[k]) {
		if objkey.Of(p) == k {
			l := p.Spec.Listener
			out.Target = apiwire.TraceTarget{Address: l.Address, Port: l.Port, Protocol: string(l.Protocol), DebugHeaders: p.Spec.DebugHeaders}
		}
	}
	return out, nil
}

// WhatIf compares the policy k as served with more endpoints down (POST .../whatif): one preview, in a
// list as diff --traffic's.
func (s *Server) WhatIf(k objkey.Key, req apiwire.WhatIfRequest) ([]*trafficmodel.Preview, error) {
	if len(req.Down) == 0 && len(req.Joined) == 0 {
		return nil, refused(http.StatusBadRequest, "down or joined: name at least one zone=NAME or endpoint=ADDRESS[:PORT]")
	}
	sv, err := s.served(k, req.Zone)
	if err != nil {
		return nil, err
	}
	before, err := s.model(sv, k, nil)
	if err != nil {
		return nil, err
	}
	after, err := s.model(sv, k, req.Down)
	if err != nil {
		return nil, err
	}
	if err := joined(sv, k, after, req.Predict); err != nil {
		return nil, err
	}
	return []*trafficmodel.Preview{trafficmodel.Compare(before, after)}, nil
}

// joined ramps the endpoints req.Joined names in m up as slow start has them req.At after they joined.
func joined(sv *served, k objkey.Key, m *trafficmodel.Policy, req apiwire.Predict) error {
	ages, err := trafficmodel.JoinedAges(sv.cfg, k.Namespace, k.Name, req.Joined, req.At)
	if err != nil {
		return refused(http.StatusBadRequest, "%v", err)
	}
	m.Joined(ages)
	return nil
}

// served is the policy k as the server serves it: its translation's IR, its resources as published, and
// the Envoys a prediction is for (one in zone, or else the proxy group's).
type served struct {
	cfg    *ir.Config
	built  *trafficmodel.Built
	envoys trafficmodel.Envoys
	health proxystats.Health
}

func (s *Server) served(k objkey.Key, zone *string) (*served, error) {
	res, _ := s.Engine.Result()
	pr := res.Policies.Of(k)
	if pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	if !pr.Accepted {
		return nil, refused(http.StatusConflict, "policy %s is not served: %s", k, pr.AcceptedMessage)
	}
	b, err := trafficmodel.BuildFrom(res.IR, k.Namespace, k.Name, s.Engine.Resource)
	if err != nil {
		return nil, refused(http.StatusConflict, "%v", err)
	}
	e, err := s.envoys(b.Group, zone)
	if err != nil {
		return nil, err
	}
	return &served{cfg: res.IR, built: b, envoys: e, health: s.health()}, nil
}

// model is the traffic model of the served policy with the endpoints its Envoys report ejected and those
// the selectors take down.
func (s *Server) model(sv *served, k objkey.Key, selectors []string) (*trafficmodel.Policy, error) {
	down, err := s.downs(sv.cfg, k, sv.health, selectors)
	if err != nil {
		return nil, err
	}
	m, err := trafficmodel.FromBuilt(sv.built, down)
	if err != nil {
		return nil, refused(http.StatusConflict, "%v", err)
	}
	return m.From(sv.envoys), nil
}

func (s *Server) health() proxystats.Health {
	if s.Health == nil {
		return nil
	}
	return s.Health()
}

// downs are the endpoints of k's clusters in cfg that the Envoys report ejected (as the policy's status
// counts them), and those the selectors name.
func (s *Server) downs(cfg *ir.Config, k objkey.Key, health proxystats.Health, selectors []string) (trafficmodel.Down, error) {
	down := trafficmodel.Down{}
	for _, g := range cfg.Groups {
		for _, c := range g.Clusters {
			if _, used := g.ClusterSource(c, k.Namespace, k.Name); !used {
				continue
			}
			b := health[g.Name][c.Name]
			for _, e := range b.Ejected {
				// Draining is what the served assignment says, which the model reads (and a session may
				// keep a draining endpoint): it is not a failure the Envoys found.
				reasons := slices.DeleteFunc(slices.Clone(e.Reasons), func(r string) bool { return r == proxystats.ReasonDraining })
				if len(reasons) == 0 {
					continue
				}
				down[e.Address] = fmt.Sprintf("%s (on %d of %d Envoys)", strings.Join(reasons, ", "), e.Proxies, b.Proxies)
			}
		}
	}
	if len(selectors) == 0 {
		return down, nil
	}
	sels, err := trafficmodel.ParseSelectors(selectors)
	if err != nil {
		return nil, refused(http.StatusBadRequest, "down %v", err)
	}
	down, err = trafficmodel.WithDown(cfg, k.Namespace, k.Name, down, sels)
	if err != nil {
		return nil, refused(http.StatusBadRequest, "down: %v", err)
	}
	return down, nil
}

// envoys are the Envoys a prediction for group is for: one in zone when it is given, or else the group's
// connected Envoys (every replica's), by zone.
func (s *Server) envoys(group string, zone *string) (trafficmodel.Envoys, error) {
	if zone != nil {
		e, err := trafficmodel.EnvoysIn(*zone)
		if err != nil {
			// The bootstrap's message names lbctl's flag; this is the request's field.
			return nil, refused(http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), "--"))
		}
		return e, nil
	}
	return trafficmodel.EnvoysByZone(s.envoyZones(group)), nil
}

// envoyZones counts group's connected Envoys (every replica's) by zone.
func (s *Server) envoyZones(group string) map[string]int {
	var proxies func() []xdsserver.ProxyStatus
	switch {
	case s.AllProxies != nil:
		proxies = s.AllProxies
	case s.Tracker != nil:
		proxies = s.Tracker.Proxies
	default:
		return nil
	}
	count, seen := map[string]int{}, map[string]bool{}
	for _, p := range proxies() {
		if p.Group == group && !seen[p.NodeID] {
			seen[p.NodeID] = true
			count[p.Zone]++
		}
	}
	return count
}

// Traffic previews what pushing body would do to the traffic of each policy in it (POST /v1/traffic):
// before is what is served, after what the push would serve, planned as a push is (and refused as it
// would be), with the health the Envoys report. In Kubernetes mode the body's policies replace or join the
// cluster's.
func (s *Server) Traffic(body []byte, zone *string) ([]*trafficmodel.Preview, error) {
	before, after, keys, err := s.plan(body)
	if err != nil {
		return nil, err
	}
	health := s.health()
	out := []*trafficmodel.Preview{}
	for _, k := range keys {
		down, err := s.downs(before.IR, k, health, nil)
		if err != nil {
			return nil, err
		}
		if more, err := s.downs(after.IR, k, health, nil); err == nil {
			for a, why := range more {
				down[a] = why
			}
		}
		var b, a *trafficmodel.Policy
		if pr := before.Policies.Of(k); pr != nil && pr.Accepted {
			if b, err = trafficmodel.ForPolicyServed(before.IR, k.Namespace, k.Name, down, s.Engine.Resource); err != nil {
				b = nil
			}
		}
		// After: what xdsbuild would build of the planned IR.
		if a, err = trafficmodel.ForPolicy(after.IR, k.Namespace, k.Name, down); err != nil {
			if pr := after.Policies.Of(k); pr != nil && !pr.Accepted {
				return nil, refused(http.StatusConflict, "%s would not be served: %s", k, pr.AcceptedMessage)
			}
			a = nil
		}
		for _, m := range []*trafficmodel.Policy{b, a} {
			if m == nil {
				continue
			}
			e, err := s.envoys(m.Group, zone)
			if err != nil {
				return nil, err
			}
			m.From(e)
		}
		if b == nil && a == nil {
			continue
		}
		out = append(out, trafficmodel.Compare(b, a))
	}
	return out, nil
}

// plan works out what pushing body would serve, without changing anything: before and after, and the keys
// of the body's policies in its order. Policies of the store (or new ones outside Kubernetes mode) are
// planned as a push is, and refused as it would be; those of the config directory or of Kubernetes replace
// or join their source's, as editing the file or kubectl apply would.
func (s *Server) plan(body []byte) (before, after *translate.Result, keys []objkey.Key, err error) {
	// Decoded and checked once, as a push is: the same request goes on to the admission's plan.
	a := s.admission()
	req, code, errs := a.decode(body)
	if errs != nil {
		return nil, nil, nil, &predictError{code: code, msgs: errs}
	}
	keys = req.order
	// The source the body's policies are held in: their own, or where a new one goes.
	before, origin := s.Engine.Result()
	pushTo := engine.SourceStore
	if s.ReadOnly != "" {
		pushTo = engine.SourceKubernetes
	}
	src := ""
	for _, k := range keys {
		o := cmp.Or(origin[k], pushTo)
		if src != "" && o != src {
			return nil, nil, nil, refused(http.StatusConflict, "the request holds policies of %s and of %s: preview each source's apart", sourceName[src], sourceName[o])
		}
		src = o
	}
	if src == engine.SourceStore && s.ReadOnly == "" {
		a.mu.Lock()
		pl, code, errs := a.plan(req, true)
		a.mu.Unlock()
		if errs != nil {
			return nil, nil, nil, &predictError{code: code, msgs: errs}
		}
		return pl.before, pl.after, keys, nil
	}
	candidate := slices.Clone(s.Engine.Policies(src))
	for _, k := range keys {
		d := req.pushed[k]
		if i := slices.IndexFunc(candidate, func(p *v1alpha1.LoadBalancerPolicy) bool { return objkey.Of(p) == k }); i >= 0 {
			candidate[i] = d.Policy
		} else {
			candidate = append(candidate, d.Policy)
		}
	}
	after = s.Engine.Preview(src, candidate)
	if errs := fieldErrors(after, keys, func(k objkey.Key) string { return req.pushed[k].Source }); len(errs) > 0 {
		return nil, nil, nil, &predictError{code: http.StatusUnprocessableEntity, msgs: errs}
	}
	return before, after, keys, nil
}

// sourceName names a source of policies as people know it.
var sourceName = map[string]string{engine.SourceStore: "the store (lbctl push-config)", engine.SourceConfigDir: "--config-dir",
	engine.SourceKubernetes: "Kubernetes"}
