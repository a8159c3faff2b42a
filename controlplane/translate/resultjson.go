package translate

import (
	"encoding/json"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// resultJSON is a PolicyResult as written: its fields in the order the golden files and anything reading
// them have always seen, whatever the order of PolicyResult's fields in memory (see PolicyResult), and its
// backends as they were written while it held them as a map (BackendOf, cluster → backend).
// TestResultJSONHasEveryField keeps the two in step.
type resultJSON struct {
	Key                 Key
	Generation          int64
	ProxyGroup          string
	Accepted            bool
	AcceptedReason      string
	AcceptedMessage     string
	ResolvedRefs        bool
	ResolvedRefsReason  string
	ResolvedRefsMessage string
	Errors              v1alpha1.FieldErrors
	Endpoints           int32
	HealthyEndpoints    int32
	ResolvedByEnvoy     bool `json:",omitempty"`
	Warnings            []string
	Listener            string
	Clusters            []string
	BackendOf           map[string]string
}

// MarshalJSON writes a result as resultJSON.
func (r PolicyResult) MarshalJSON() ([]byte, error) {
	var backendOf map[string]string
	for i, b := range r.Backends {
		if b == "" || i >= len(r.Clusters) {
			continue
		}
		if backendOf == nil {
			backendOf = map[string]string{}
		}
		backendOf[r.Clusters[i]] = b
	}
	return json.Marshal(resultJSON{Key: r.Key, Generation: r.Generation, ProxyGroup: r.ProxyGroup,
		Accepted: r.Accepted, AcceptedReason: r.AcceptedReason, AcceptedMessage: r.AcceptedMessage,
		ResolvedRefs: r.ResolvedRefs, ResolvedRefsReason: r.ResolvedRefsReason, ResolvedRefsMessage: r.ResolvedRefsMessage,
		Errors: r.Errors, Endpoints: r.Endpoints, HealthyEndpoints: r.HealthyEndpoints, ResolvedByEnvoy: r.ResolvedByEnvoy,
		Warnings: r.Warnings, Listener: r.Listener, Clusters: r.Clusters, BackendOf: backendOf})
}
