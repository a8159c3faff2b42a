package lbctl_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/internal/tools"
)

// --zone names the Envoy's locality and the static local cluster zone-aware routing needs; Envoy accepts
// the result, and a zone the API would refuse on an endpoint is refused here too.
func TestBootstrapZone(t *testing.T) {
	envoy := tools.Require(t, "envoy")
	code, out, errs := run(t, "", "bootstrap", "--node-id", "n1", "--xds-insecure", "--zone", "zone-a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var b struct {
		Node struct {
			Locality struct{ Zone string } `json:"locality"`
		} `json:"node"`
		ClusterManager struct {
			LocalClusterName string `json:"local_cluster_name"`
		} `json:"cluster_manager"`
		StaticResources struct {
			Clusters []struct {
				Name           string `json:"name"`
				LoadAssignment struct {
					Endpoints []struct {
						Locality struct{ Zone string } `json:"locality"`
					} `json:"endpoints"`
				} `json:"load_assignment"`
			} `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := yaml.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if b.Node.Locality.Zone != "zone-a" {
		t.Errorf("node.locality.zone = %q, want zone-a", b.Node.Locality.Zone)
	}
	local := ""
	for _, c := range b.StaticResources.Clusters {
		if c.Name == b.ClusterManager.LocalClusterName && len(c.LoadAssignment.Endpoints) == 1 {
			local = c.LoadAssignment.Endpoints[0].Locality.Zone
		}
	}
	if b.ClusterManager.LocalClusterName == "" || local != "zone-a" {
		t.Errorf("local cluster %q with a host in zone %q, want one in zone-a", b.ClusterManager.LocalClusterName, local)
	}
	if err := envoyAccepts(t, envoy, out); err != nil {
		t.Errorf("Envoy refuses the bootstrap: %v", err)
	}

	code, out, _ = run(t, "", "bootstrap", "--node-id", "n1", "--xds-insecure")
	if code != 0 || strings.Contains(out, "locality") || strings.Contains(out, "local_cluster_name") {
		t.Errorf("without --zone the bootstrap names a zone (exit %d):\n%s", code, out)
	}
	code, _, errs = run(t, "", "bootstrap", "--node-id", "n1", "--xds-insecure", "--zone", "zone a")
	if code == 0 || !strings.Contains(errs, "--zone: must be a zone name") {
		t.Errorf("a bad zone: exit %d, %s", code, errs)
	}
}
