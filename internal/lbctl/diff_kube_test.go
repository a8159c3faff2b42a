package lbctl

import (
	"strings"
	"testing"
)

// What a diff in Kubernetes mode reads from the cluster covers every kind the offline translation reads
// (offlineKinds), but Secrets, which it reads one by one (those the Gateways name): a kind added to one list
// and not the other would make a preview against the cluster differ from one against a file of it.
func TestRunningGatewayKindsCoverTheOfflineKinds(t *testing.T) {
	read := map[string]bool{}
	for _, gvr := range runningGatewayKinds {
		read[gvr.Group+"/"+gvr.Resource] = true
	}
	for k := range offlineKinds {
		apiVersion, kind := k[0], k[1]
		if kind == "Secret" {
			continue
		}
		group := ""
		if g, _, ok := strings.Cut(apiVersion, "/"); ok {
			group = g
		}
		resource := strings.ToLower(kind) + "s"
		if strings.HasSuffix(kind, "s") {
			resource = strings.ToLower(kind) + "es"
		} else if strings.HasSuffix(kind, "y") && !strings.ContainsAny(kind[len(kind)-2:len(kind)-1], "aeiou") {
			resource = strings.ToLower(kind[:len(kind)-1]) + "ies"
		}
		if !read[group+"/"+resource] {
			t.Errorf("%s %s is read offline, but not from the cluster (%s/%s not in runningGatewayKinds)", apiVersion, kind, group, resource)
		}
	}
}
