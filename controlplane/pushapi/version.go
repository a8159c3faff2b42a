package pushapi

import (
	"net/http"
	"runtime"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/version"
)

// version serves GET /v1/version, for lbctl version's server half.
func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, apiwire.Version{Version: version.String(), GoVersion: runtime.Version(), Settings: s.Settings, Store: s.storeStatus()})
}

func (s *Server) storeStatus() *apiwire.StoreStatus {
	if s.StoreStatus == nil {
		return nil
	}
	return s.StoreStatus()
}
