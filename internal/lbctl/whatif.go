package lbctl

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
)

func newWhatIf(g *globals) *cobra.Command {
	var namespace, file, zone string
	var out *outputFlags
	var downs, joined []string
	var at string
	cmd := &cobra.Command{
		Use:   "whatif NAME|gateway/NAME [URL] (--down | --joined) zone=NAME|endpoint=ADDRESS[:PORT]...",
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
endpoint starts healthy, and the Envoy has no zone unless --zone names one.

gateway/NAME previews every policy lbplane made of the Gateway (one per listener port and host name),
each under its Gateway, listener and host name, with the HTTPRoute rule of each route; a URL
(http://HOST[:PORT]) previews the one that serves it, as lbctl trace finds it. With -f the files may
hold Gateway API objects and the Services they name (see lbctl trace).`,
		Example: `  lbctl whatif shop --down zone=zone-a
  lbctl whatif shop --down endpoint=10.0.0.3:8080 --down endpoint=10.0.0.4
  lbctl whatif shop --down endpoint=10.0.0.3:8080 --zone zone-b
  lbctl whatif shop -f shop.yaml --down zone=zone-a -o json
  lbctl whatif shop --joined endpoint=10.0.0.5:8080 --at 30s
  lbctl whatif gateway/web -n shop --down zone=zone-a
  lbctl whatif gateway/web -n shop http://shop.example.com --down endpoint=10.0.0.3:8080`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeModelNames(g, &file, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if len(downs) == 0 && len(joined) == 0 {
				return fmt.Errorf("--down or --joined: name at least one zone=NAME or endpoint=ADDRESS[:PORT]")
			}
			tgt, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			if len(args) == 2 && tgt.gateway == "" {
				return fmt.Errorf("a request URL goes with gateway/NAME")
			}
			p := apiwire.Predict{Down: downs, Zone: zoneFlag(cmd, zone), Joined: joined, At: at}
			ns := g.namespaceFor(cmd, namespace)
			var set *offlineSet
			if file != "" {
				if set, err = readOffline(file, cmd.InOrStdin(), cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			one := func(name string) ([]*trafficmodel.Preview, error) {
				if set != nil {
					return offlineWhatIf(set, file, ns, name, p)
				}
				c, err := g.client()
				if err != nil {
					return nil, err
				}
				return c.WhatIf(cmd.Context(), ns, name, apiwire.WhatIfRequest{Predict: p})
			}
			if tgt.gateway == "" {
				pv, err := one(tgt.policy)
				if err != nil {
					return err
				}
				return out.Print(cmd.OutOrStdout(), printable{Object: pv, Names: []string{policyName(tgt.policy)},
					Text: func(w io.Writer, _ bool) error { printPreviews(w, pv); return nil }})
			}
			gw := types.NamespacedName{Namespace: ns, Name: tgt.gateway}
			gps, why, err := gatewayPoliciesFor(cmd.Context(), g, set, file, gw)
			if err != nil {
				return err
			}
			if len(args) == 2 || len(gps) == 0 {
				var gr gatewayRequest
				if len(args) == 2 {
					if gr, err = parseRequestURL(args[1]); err != nil {
						return err
					}
				}
				gp, err := pickGatewayPolicy(gw, gps, gr.port, gr.host, why)
				if err != nil {
					return err
				}
				gps = []*gatewayPolicy{gp}
			}
			var pvs []*gatewayPreview
			var names []string
			var errs []error
			for _, gp := range gps {
				pv, err := one(gp.policy.Name)
				if err != nil {
					// A policy of the Gateway whose backends do not hold what --down or --joined names (the
					// Service of another host name's routes, say) is left out, and said so.
					errs = append(errs, fmt.Errorf("%s, host name %s: %w", gp.policy.Name, hostLabel(gp.served.Hostname), err))
					continue
				}
				for _, v := range pv {
					pvs = append(pvs, &gatewayPreview{Preview: v, Gateway: gp.trace(), gw: gp})
				}
				names = append(names, policyName(gp.policy.Name))
			}
			if len(pvs) == 0 {
				return errors.Join(errs...)
			}
			for _, e := range errs {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: not previewed: %v\n", e)
			}
			return out.Print(cmd.OutOrStdout(), printable{Object: pvs, Names: names,
				Text: func(w io.Writer, _ bool) error { printGatewayPreviews(w, pvs); return nil }})
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

// offlineWhatIf compares the policy namespace/name of the files' set with every endpoint healthy and at full
// weight and as p says (downs down, joined endpoints warming up).
func offlineWhatIf(set *offlineSet, file, namespace, name string, p apiwire.Predict) ([]*trafficmodel.Preview, error) {
	res, _, err := offlinePolicy(set, file, namespace, name)
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
