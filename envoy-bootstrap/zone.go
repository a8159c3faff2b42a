package envoybootstrap

import (
	"fmt"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// LocalCluster is the static cluster that names this Envoy's zone for zone-aware routing
// (cluster_manager.local_cluster_name). lbplane never names its own clusters so.
const LocalCluster = "lbplane_local"

// checkZone accepts the API's zone names, so that every zone an endpoint can carry can be an Envoy's zone too.
func checkZone(z string) error {
	if z != "" && !v1alpha1.IsZoneName(z) {
		return fmt.Errorf("--zone: must be a zone name (letters, digits, '-', '_', '.'; at most 63), got %q", z)
	}
	return nil
}
