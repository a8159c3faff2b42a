package lbctl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

func newWhatIf(g *globals) *cobra.Command {
	var namespace, file, zone string
	var out *outputFlags
	var downs, joined []string
	var at string
	cmd := &cobra.Command{
		Use:   "whatif NAME (--down | --joined) zone=NAME|endpoint=ADDRESS[:PORT]...",
		Short: "Predict where a policy's traffic goes if endpoints or a zone go down, or while new endpoints warm up",
		Long: `Take endpoints down in the traffic model and show each endpoint's predicted share before and
after, the hash keys and sessions that move, and the zones traffic fails over to, with Envoy's
priority, zone and panic rules (see lbctl trace), and what the model cannot predict. Nothing is changed.

With --joined, the endpoints named joined --at ago (0s unless given): on a backend with slowStart, their
shares are those of Envoy's ramp at that age (weight × max((age/window)^(1/aggression), minWeightPercent)),
and "before" is every endpoint at its full weight. Endpoints that joined together ramp together: when every
endpoint of a backend is new, the shares are as without slow start.

The server answers from what it serves: "before" is the current health (what lbplane last read from the
Envoys' /clusters), and zone-aware backends are predicted for the zones of the policy's proxy group's
connected Envoys (--zone: for an Envoy in that zone). With -f the policy comes from files, every
endpoint starts healthy, and the Envoy has no zone unless --zone names one.`,
		Example: `  lbctl whatif shop --down zone=zone-a
  lbctl whatif shop --down endpoint=10.0.0.3:8080 --down endpoint=10.0.0.4
  lbctl whatif shop --down endpoint=10.0.0.3:8080 --zone zone-b
  lbctl whatif shop -f shop.yaml --down zone=zone-a -o json
  lbctl whatif shop --joined endpoint=10.0.0.5:8080 --at 30s`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeModelNames(g, &file, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if len(downs) == 0 && len(joined) == 0 {
				return fmt.Errorf("--down or --joined: name at least one zone=NAME or endpoint=ADDRESS[:PORT]")
			}
			p := apiwire.Predict{Down: downs, Zone: zoneFlag(cmd, zone), Joined: joined, At: at}
			ns := g.namespaceFor(cmd, namespace)
			var pv []*trafficmodel.Preview
			var err error
			if file != "" {
				pv, err = offlineWhatIf(cmd, file, ns, args[0], p)
			} else {
				var c *pushclient.Client
				if c, err = g.client(); err == nil {
					pv, err = c.WhatIf(cmd.Context(), ns, args[0], apiwire.WhatIfRequest{Predict: p})
				}
			}
			if err != nil {
				return err
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: pv, Names: []string{policyName(args[0])},
				Text: func(w io.Writer, _ bool) error { printPreviews(w, pv); return nil }})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME (Kubernetes mode: the context's, unless given)")
	f.StringVarP(&file, "filename", "f", "", "model these files offline instead of asking the server")
	f.StringArrayVar(&downs, "down", nil, "zone=NAME or endpoint=ADDRESS[:PORT] to take down (repeatable)")
	addJoinedFlags(cmd, &joined, &at)
	addZoneFlag(cmd, &zone)
	out = addOutputFlags(cmd, "")
	return cmd
}

// offlineWhatIf compares the policy namespace/name of files with every endpoint healthy and at full weight
// and as p says (downs down, joined endpoints warming up).
func offlineWhatIf(cmd *cobra.Command, file, namespace, name string, p apiwire.Predict) ([]*trafficmodel.Preview, error) {
	res, _, err := offlinePolicy(cmd, file, namespace, name)
	if err != nil {
		return nil, err
	}
	before, err := offlineModel(res, namespace, name, apiwire.Predict{Zone: p.Zone})
	if err != nil {
		return nil, err
	}
	after, err := offlineModel(res, namespace, name, p)
	if err != nil {
		return nil, err
	}
	return []*trafficmodel.Preview{trafficmodel.Compare(before, after)}, nil
}
