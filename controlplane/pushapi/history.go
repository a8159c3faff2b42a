package pushapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// HistoryResult and HealthEvent are the wire types of GET /v1/events and GET .../history (see apiwire).
type (
	HistoryResult = apiwire.HistoryResult
	HealthEvent   = apiwire.HealthEvent
)

// events answers the kept health events after ?since=SEQ (all when unset), of one policy with
// ?namespace=NS&name=NAME.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "since: not a sequence number: "+strconv.Quote(v))
			return
		}
		since = n
	}
	var policy *objkey.Key
	if q.Has("name") {
		policy = &objkey.Key{Namespace: q.Get("namespace"), Name: q.Get("name")}
	}
	if s.History == nil {
		writeJSON(w, http.StatusOK, []HealthEvent{})
		return
	}
	writeJSON(w, http.StatusOK, s.History.EventsSince(since, policy))
}

// PolicyHistory returns a policy's health events and its backends' series over the last hour.
func (s *Server) PolicyHistory(k objkey.Key) (*HistoryResult, error) {
	res, _ := s.Engine.Result()
	pr := res.Policies.Of(k)
	if pr == nil {
		return nil, fmt.Errorf("policy %s %w", k, ErrNotFound)
	}
	out := &HistoryResult{Policy: k.String(), Events: []HealthEvent{}, Backends: []apiwire.BackendSeries{}}
	if s.History == nil {
		return out, nil
	}
	clusters := map[string]string{}
	for _, c := range pr.Clusters {
		if name, ok := pr.BackendOf(c); ok {
			clusters[c] = name
		}
	}
	out.Events = s.History.EventsSince(0, &k)
	out.Backends = s.History.Series(pr.ProxyGroup, clusters)
	return out, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	h, err := s.PolicyHistory(objkey.Key{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")})
	if err != nil {
		writeErr(w, http.StatusNotFound, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, h)
}
