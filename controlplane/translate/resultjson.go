package translate

import (
	"encoding/json"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// MarshalJSON writes a result as it was written while it held its backends as a map (BackendOf, cluster →
// backend): the golden files and anything reading them see the same document.
func (r PolicyResult) MarshalJSON() ([]byte, error) {
	type plain PolicyResult // without this method
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
	return json.Marshal(struct {
		plain
		// Hides plain's Backends: a field tagged "-" would not, it is dropped before names are compared.
		Backends  *struct{} `json:"Backends,omitempty"`
		BackendOf map[string]string
		// Algorithm is the first backend's, defaulted (see PolicyResult.Algorithm).
		Algorithm v1alpha1.Algorithm `json:",omitempty"`
	}{plain: plain(r), BackendOf: backendOf, Algorithm: r.Algorithm()})
}
