package policystatus

import (
	"slices"
	"strings"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/controlplane/apiwire"

	"github.com/lbplane/lbplane/controlplane/ir"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

var kinds = map[string]ir.Kind{
	resource.ListenerType: ir.KindListener,
	resource.RouteType:    ir.KindRoutes,
	resource.ClusterType:  ir.KindCluster,
	resource.EndpointType: ir.KindEndpoints,
	resource.SecretType:   ir.KindSecret,
	// A scope names one host of a port served as scoped routes (see ir.Listener.Scopable).
	resource.ScopedRouteType: ir.KindScope,
}

// Owners names the policies the rejected resources of one type came from, by the
// sources translation recorded on the IR (it is the tracker's Owners hook; cfg is the IR being served).
//
// A listener or route table is shared by every policy on its port, and Envoy rejects it whole: none of
// their changes on it is live. Still, the rejection is usually one policy's doing, and marking every
// policy on a busy port unprogrammed for it would hide whose it is. So a NACK of a shared listener, route
// table or certificate marks only the policies whose virtual host or route Envoy's message names, and all
// of them only when it names none.
func Owners(cfg *ir.Config, group, typeURL string, resources []string, msg string) []apiwire.PolicyRef {
	if cfg == nil || cfg.Groups[group] == nil {
		return nil
	}
	g := cfg.Groups[group]
	kind, ok := kinds[typeURL]
	if !ok {
		return nil
	}
	var out []apiwire.PolicyRef
	for _, name := range resources {
		owners := g.Owners(kind, name)
		if len(owners) > 1 {
			var named []ir.Owner
			for _, o := range owners {
				if slices.ContainsFunc(o.Names, func(n string) bool { return xdsserver.Mentions(msg, n) }) {
					named = append(named, o)
				}
			}
			if len(named) > 0 {
				owners = named
			}
		}
		for _, o := range owners {
			out = append(out, apiwire.PolicyRef(o.Source.Policy()))
		}
	}
	slices.SortFunc(out, apiwire.ComparePolicyRefs)
	return slices.Compact(out)
}

// rejection returns the message of a NACK of p that falls on the policy key, or "".
func rejection(p xdsserver.ProxyStatus, key types.NamespacedName) string {
	return rejectionSince(p, key, time.Time{})
}

// rejectionSince is rejection, counting only the NACKs made at since or later.
func rejectionSince(p xdsserver.ProxyStatus, key types.NamespacedName, since time.Time) string {
	for _, ts := range p.Types {
		if !ts.Nacked || ts.NackedAt.Before(since) {
			continue
		}
		// Resources unknown: the NACK cannot be put on particular policies, so it counts against all.
		if ts.NackedResources == nil || slices.Contains(ts.NackedPolicies, apiwire.PolicyRef(key)) {
			// Envoy's messages end in a newline (and list several errors on lines of their own): one line
			// each, and none trailing, in a condition message.
			return shortType(ts.TypeURL) + ": " + strings.Join(strings.Fields(ts.NackMessage), " ")
		}
	}
	return ""
}

func shortType(u string) string { return u[strings.LastIndex(u, ".")+1:] }
