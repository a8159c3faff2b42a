package envoybootstrap

import (
	"fmt"
	"regexp"
)

// LocalCluster is the static cluster that names this Envoy's zone for zone-aware routing
// (cluster_manager.local_cluster_name). lbplane never names its own clusters so.
const LocalCluster = "lbplane_local"

// zoneRe is the API's zone name (a Kubernetes label value, as topology.kubernetes.io/zone is), so that
// every zone an endpoint can carry can be an Envoy's zone too.
var zoneRe = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

func checkZone(z string) error {
	if z != "" && (len(z) > 63 || !zoneRe.MatchString(z)) {
		return fmt.Errorf("--zone: must be a zone name (letters, digits, '-', '_', '.'; at most 63), got %q", z)
	}
	return nil
}
