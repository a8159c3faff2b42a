package pushapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Endpoint overrides (lbctl endpoint drain|maintenance|ready, the dashboard): an operator sets an endpoint's
// state as HAProxy's runtime API's "set server state" does, outside the policy's spec. Each change is written
// to the store before it is served, so it survives a restart, a push of the policy leaves it in force, and
// with etcd every replica serves it (serve follows the store's announcements and calls LoadOverrides).

// maxEndpointStateRequest bounds the body of an endpoint-state request.
const maxEndpointStateRequest = 4 << 10

// overrideState serialises the changes of the overrides made through this server.
type overrideState struct {
	mu sync.Mutex
}

func (s *Server) overrideRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/policies/{namespace}/{name}/endpoint-state", s.auth(s.endpointState)) // admin token only
	mux.Handle("GET /v1/endpoint-overrides", s.authRead(s.endpointOverrides))
}

// overrideStore is the store's side of the overrides; nil when it keeps none.
func (s *Server) overrideStore() store.Overrides {
	o, _ := s.Store.(store.Overrides)
	return o
}

// LoadOverrides reads the overrides the store holds and serves them: at start, before xDS is served, and
// whenever another replica changed them. Unchanged overrides publish nothing.
func (s *Server) LoadOverrides() error {
	st := s.overrideStore()
	if st == nil {
		return nil
	}
	s.overrides.mu.Lock()
	defer s.overrides.mu.Unlock()
	stored, err := st.EndpointOverrides()
	if err != nil {
		return err
	}
	next := translate.Overrides{}
	for key, v := range stored {
		k, ok := objkey.Parse(key)
		var ovs []v1alpha1.EndpointOverride
		if err := json.Unmarshal(v, &ovs); err != nil || !ok {
			s.Log.Error("an endpoint overrides record does not decode; it is left out", "policy", key, "error", err)
			continue
		}
		if len(ovs) > 0 {
			next[k] = ovs
		}
	}
	if sameOverrides(s.Engine.Overrides(), next) {
		return nil
	}
	s.Engine.SetOverrides(next)
	s.Log.Info("endpoint overrides loaded from the store", "policies", len(next))
	return nil
}

func sameOverrides(a, b translate.Overrides) bool {
	return len(a) == len(b) && maps.EqualFunc(a, b, func(x, y []v1alpha1.EndpointOverride) bool {
		return slices.EqualFunc(x, y, func(p, q v1alpha1.EndpointOverride) bool {
			return p.Backend == q.Backend && p.Endpoint == q.Endpoint && p.State == q.State && p.Since.Equal(&q.Since)
		})
	})
}

// canonicalEndpoint writes an override's endpoint one way ("198.51.100.7:80", "[2001:db8::1]:443", an
// address alone, a host name in lower case), so that two spellings of one endpoint are one override.
func canonicalEndpoint(endpoint string) (string, error) {
	host, port, err := v1alpha1.SplitEndpoint(endpoint)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	if port == 0 {
		return host, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// EndpointStateError is a refused endpoint-state request: Code is the HTTP status.
type EndpointStateError struct {
	Code int
	Msg  string
}

func (e *EndpointStateError) Error() string { return e.Msg }

func stateError(code int, format string, args ...any) error {
	return &EndpointStateError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// SetEndpointState sets an endpoint of policy k Draining or under Maintenance, or Ready again (the override
// removed), writes it to the store and serves it, and waits up to PushWait for the policy's Envoys to take
// it. The caller has checked the admin token (or the dashboard's admin session). An error is an
// *EndpointStateError.
func (s *Server) SetEndpointState(ctx context.Context, k objkey.Key, req apiwire.EndpointStateRequest) (*apiwire.EndpointStateResult, error) {
	if s.ReadOnly != "" {
		return nil, stateError(http.StatusConflict, "%s; an endpoint drains with its spec's state: Draining, or as its Pod terminates", s.ReadOnly)
	}
	st := s.overrideStore()
	if st == nil {
		return nil, stateError(http.StatusNotImplemented, "this store keeps no endpoint overrides")
	}
	endpoint, err := canonicalEndpoint(req.Endpoint)
	if err != nil {
		return nil, stateError(http.StatusBadRequest, "%v", err)
	}
	state := v1alpha1.EndpointOverrideState(req.State)
	if req.State != apiwire.StateReady {
		o := v1alpha1.EndpointOverride{Backend: req.Backend, Endpoint: endpoint, State: state}
		if err := o.Validate(); err != nil {
			if strings.HasPrefix(err.Error(), "state:") {
				err = fmt.Errorf("state: unsupported value %q; supported: %s, %s, %s", req.State, v1alpha1.OverrideDraining, v1alpha1.OverrideMaintenance, apiwire.StateReady)
			}
			return nil, stateError(http.StatusBadRequest, "%v", err)
		}
	}
	s.overrides.mu.Lock()
	defer s.overrides.mu.Unlock()
	res, _ := s.Engine.Result()
	pr := res.Policies.Of(k)
	if pr == nil {
		return nil, stateError(http.StatusNotFound, "policy %s not found", k)
	}
	if req.Backend != "" && !slices.Contains(pr.Backends, req.Backend) {
		return nil, stateError(http.StatusNotFound, "backend: policy %s has no backend %q (it has %s)", k, req.Backend, strings.Join(slices.DeleteFunc(slices.Clone(pr.Backends), func(b string) bool { return b == "" }), ", "))
	}
	cur := s.Engine.Overrides()
	// The policy's overrides without the ones this request replaces: the same endpoint (in the same backend,
	// or in any when the request names none).
	var kept []v1alpha1.EndpointOverride
	replaced := false
	for _, o := range cur[k] {
		if o.Endpoint == endpoint && (req.Backend == "" || o.Backend == req.Backend) {
			replaced = true
			continue
		}
		kept = append(kept, o)
	}
	without := maps.Clone(cur)
	if without == nil {
		without = translate.Overrides{}
	}
	if len(kept) > 0 {
		without[k] = kept
	} else {
		delete(without, k)
	}
	// Which endpoints the request names, as the policy is served without an override of them; the spec's
	// own drains among them.
	probe := v1alpha1.EndpointOverride{Backend: req.Backend, Endpoint: endpoint}
	matched, draining := translate.Matching(s.Engine.PlanOverrides(without), k, probe)
	if len(matched) == 0 && !(req.State == apiwire.StateReady && replaced) {
		in := ""
		if req.Backend != "" {
			in = " in backend " + req.Backend
		}
		return nil, stateError(http.StatusNotFound, "endpoint: policy %s has no endpoint %s%s", k, endpoint, in)
	}
	next := without
	if req.State != apiwire.StateReady {
		list := append(slices.Clone(kept), v1alpha1.EndpointOverride{Backend: req.Backend, Endpoint: endpoint, State: state,
			Since: metav1.NewTime(time.Now().UTC().Truncate(time.Second))})
		if len(list) > v1alpha1.MaxEndpointOverrides {
			return nil, stateError(http.StatusBadRequest, "policy %s holds %d endpoint overrides, the most one policy may", k, v1alpha1.MaxEndpointOverrides)
		}
		// The same state again keeps its time: nothing changes.
		for _, o := range cur[k] {
			if o.Endpoint == endpoint && o.Backend == req.Backend && o.State == state {
				list[len(list)-1].Since = o.Since
			}
		}
		next = maps.Clone(without)
		next[k] = list
	}
	out := &apiwire.EndpointStateResult{Policy: k.String(), Endpoints: int32(len(matched))}
	if req.State == apiwire.StateReady {
		out.SpecDraining = draining
	}
	if out.Changed = !sameOverrides(cur, next); out.Changed {
		if err := s.storeOverrides(st, k, next[k]); err != nil {
			return nil, err
		}
		s.Engine.SetOverrides(next)
		s.Log.Info("endpoint state set", "policy", k.String(), "endpoint", endpoint, "backend", req.Backend, "state", req.State, "endpoints", len(matched))
	}
	res, _ = s.Engine.Result()
	if pr := res.Policies.Of(k); pr != nil {
		out.Overrides = pr.EndpointOverrides()
		if s.PushWait > 0 && s.Tracker != nil && out.Changed {
			lagging := s.Tracker.Lagging(ctx, []string{pr.ProxyGroup}, s.PushWait)
			out.LaggingTotal = len(lagging)
			out.Lagging = lagging[:min(len(lagging), apiwire.MaxLagging)]
		}
	}
	if out.Overrides == nil {
		out.Overrides = []v1alpha1.EndpointOverrideStatus{}
	}
	return out, nil
}

// storeOverrides writes policy k's overrides (none: the record is deleted). The etcd store writes only over
// what this replica read: after another replica's write the overrides are read again first, and the
// request is refused if they changed meanwhile (the operator sees the other change and decides again).
func (s *Server) storeOverrides(st store.Overrides, k objkey.Key, ovs []v1alpha1.EndpointOverride) error {
	var v []byte
	if len(ovs) > 0 {
		var err error
		if v, err = json.Marshal(ovs); err != nil {
			return stateError(http.StatusInternalServerError, "encoding the overrides: %v", err)
		}
	}
	err := st.PutEndpointOverrides(k.String(), v)
	if errors.Is(err, store.ErrConflict) {
		// Read again: a write of another replica this one has not heard of yet.
		stored, rerr := st.EndpointOverrides()
		if rerr == nil {
			var theirs []v1alpha1.EndpointOverride
			if b, ok := stored[k.String()]; ok {
				rerr = json.Unmarshal(b, &theirs)
			}
			if rerr == nil && sameOverrides(translate.Overrides{k: theirs}, translate.Overrides{k: s.Engine.Overrides()[k]}) {
				err = st.PutEndpointOverrides(k.String(), v)
			}
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrConflict):
		return stateError(http.StatusConflict, "another lbplane replica changed the endpoint overrides of %s meanwhile: look at them (lbctl endpoint list) and try again", k)
	case errors.Is(err, store.ErrUnavailable):
		return stateError(http.StatusServiceUnavailable, "the store is unreachable: the change was not made")
	default:
		return stateError(http.StatusInternalServerError, "writing the store: %v", err)
	}
}

// EndpointStateHandler serves an endpoint-state request (the policy as {namespace} and {name} in the
// pattern) without checking a token: its caller has (the dashboard, for a session of the admin token).
func (s *Server) EndpointStateHandler() http.HandlerFunc { return s.endpointState }

// endpointState serves POST .../endpoint-state.
func (s *Server) endpointState(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEndpointStateRequest))
	if err != nil {
		writeErr(w, http.StatusRequestEntityTooLarge, "request body: over 4 KiB")
		return
	}
	var req apiwire.EndpointStateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, http.StatusBadRequest, "request body: not a JSON object with endpoint, state and backend")
		return
	}
	k := objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	out, err := s.SetEndpointState(r.Context(), k, req)
	if err != nil {
		var se *EndpointStateError
		if errors.As(err, &se) {
			writeErr(w, se.Code, se.Msg)
		} else {
			writeErr(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// EndpointOverrides lists every policy's overrides in force, by policy key.
func (s *Server) EndpointOverrides() []apiwire.PolicyOverrides {
	res, _ := s.Engine.Result()
	out := []apiwire.PolicyOverrides{}
	for _, k := range slices.SortedFunc(maps.Keys(s.Engine.Overrides()), store.CompareKeys) {
		pr := res.Policies.Of(k)
		if pr == nil {
			continue
		}
		out = append(out, apiwire.PolicyOverrides{Namespace: k.Namespace, Name: k.Name, Overrides: pr.EndpointOverrides()})
	}
	return out
}

func (s *Server) endpointOverrides(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.EndpointOverrides())
}

// dropOverrides forgets a deleted policy's overrides: a policy made again under its name starts without.
func (s *Server) dropOverrides(k objkey.Key) {
	st := s.overrideStore()
	if st == nil {
		return
	}
	s.overrides.mu.Lock()
	defer s.overrides.mu.Unlock()
	cur := s.Engine.Overrides()
	if _, ok := cur[k]; !ok {
		return
	}
	if err := s.storeOverrides(st, k, nil); err != nil {
		s.Log.Error("forgetting a deleted policy's endpoint overrides", "policy", k.String(), "error", err)
		return
	}
	next := maps.Clone(cur)
	delete(next, k)
	s.Engine.SetOverrides(next)
}
