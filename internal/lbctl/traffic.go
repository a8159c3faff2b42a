package lbctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// translatePolicies translates offline, reading the files policies name as lbctl validate does. Policies
// that are not accepted simply have no IR: the traffic model says they are not served. A preview of the
// traffic, it leaves the server's address rules to lbctl validate and lint (previewRules).
func translatePolicies(policies []*v1alpha1.LoadBalancerPolicy) *translate.Result {
	return translateOffline(policies, translate.Refs{})
}

// trafficSides are the policies before and after a change, translated offline, every endpoint healthy.
type trafficSides struct {
	before, after *translate.Result
	keys          []objkey.Key // the policies the change touches
	// envoys are the Envoys the previews are for (an Envoy in --zone, or one without a zone).
	envoys trafficmodel.Envoys
	// ifChanged are keys previewed only when their traffic changes: the Gateways' policies, which a change
	// of any object they are made of may move.
	ifChanged map[objkey.Key]bool
	// gateways say what each Gateway's policy serves (after the change; before, for one removed).
	gateways map[objkey.Key]*gatewayPolicy
	// fleet, when set, says what lbplane's Envoys report of a policy that runs (a preview against the
	// cluster): the endpoints they find down, and the Envoys by zone (nil: s.envoys); ok is false when it
	// has nothing to say of it.
	fleet func(k objkey.Key) (down trafficmodel.Down, envoys trafficmodel.Envoys, ok bool)
}

func replacing(old, next []*v1alpha1.LoadBalancerPolicy) []*v1alpha1.LoadBalancerPolicy {
	replaced := map[objkey.Key]bool{}
	for _, p := range next {
		replaced[objkey.Of(p)] = true
	}
	out := slices.Clone(next)
	for _, p := range old {
		if !replaced[objkey.Of(p)] {
			out = append(out, p)
		}
	}
	return out
}

// offlineSides: from is what runs, file replaces or joins it. No health is known. Gateway API objects (and
// the Services they name) in either become policies: each Gateway's policy whose traffic the change moves
// is previewed, under its Gateway, listener and host name.
func offlineSides(from, file string, stdin io.Reader, stderr io.Writer) (*trafficSides, error) {
	oldObjs, err := readOfflineObjects(from, nil)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	newObjs, err := readOfflineObjects(file, stdin)
	if err != nil {
		return nil, err
	}
	old, next := manifest.Policies(oldObjs.docs), manifest.Policies(newObjs.docs)
	if !oldObjs.kube() && !newObjs.kube() {
		return sides(old, replacing(old, next), next), nil
	}
	oldObjs.warn(stderr)
	newObjs.warn(stderr)
	before, after := oldObjs.translate(), oldObjs.replacedBy(newObjs).translate()
	s := &trafficSides{before: before.res, after: after.res, ifChanged: map[objkey.Key]bool{}, gateways: map[objkey.Key]*gatewayPolicy{}}
	for _, p := range next {
		s.keys = append(s.keys, objkey.Of(p))
	}
	for _, set := range []*offlineSet{after, before} {
		gps, err := gatewayPoliciesOf(set.policies)
		if err != nil {
			return nil, err
		}
		for _, gp := range gps {
			k := objkey.Of(gp.policy)
			if s.gateways[k] == nil {
				s.gateways[k] = gp
				if !slices.Contains(s.keys, k) {
					s.keys = append(s.keys, k)
					s.ifChanged[k] = true
				}
			}
		}
	}
	return s, nil
}

func sides(old, all, touched []*v1alpha1.LoadBalancerPolicy) *trafficSides {
	s := &trafficSides{before: translatePolicies(old), after: translatePolicies(all)}
	for _, p := range touched {
		s.keys = append(s.keys, objkey.Of(p))
	}
	return s
}

// previews models each touched policy before and after: with every endpoint healthy, or with what the
// Envoys report (fleet) for each preview shown.
func (s *trafficSides) previews() ([]*trafficmodel.Preview, error) {
	var out []*trafficmodel.Preview
	for _, k := range s.keys {
		pv, err := s.preview(k, nil, s.envoys)
		if err != nil {
			return nil, err
		}
		if pv == nil {
			continue
		}
		if s.ifChanged[k] && !pv.Added && !pv.Removed && !trafficChanges([]*trafficmodel.Preview{pv}) {
			continue
		}
		if s.fleet != nil {
			if down, envoys, ok := s.fleet(k); ok {
				if envoys == nil {
					envoys = s.envoys
				}
				if pv, err = s.preview(k, down, envoys); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, pv)
	}
	return out, nil
}

// preview models policy k before and after with the endpoints down takes down, for envoys (nil when the
// policy is on neither side).
func (s *trafficSides) preview(k objkey.Key, down trafficmodel.Down, envoys trafficmodel.Envoys) (*trafficmodel.Preview, error) {
	before, _ := trafficmodel.ForPolicy(s.before.IR, k.Namespace, k.Name, down)
	after, err := trafficmodel.ForPolicy(s.after.IR, k.Namespace, k.Name, down)
	if err != nil {
		if r := s.after.Policies.Of(k); r != nil && !r.Accepted {
			return nil, fmt.Errorf("%s would not be served: %s", k, r.AcceptedMessage)
		}
		after = nil
	}
	if before == nil && after == nil {
		return nil, nil
	}
	for _, m := range []*trafficmodel.Policy{before, after} {
		if m != nil {
			m.From(envoys)
		}
	}
	return trafficmodel.Compare(before, after), nil
}

// readFleet makes the previews read, of each policy that runs, what lbplane's Envoys report (GET
// .../live): the endpoints they find down and, unless zoned (--zone names the Envoy), the zones they are
// in, so that a preview of Gateway API objects against the cluster models the fleet as lbctl trace does. A
// policy lbplane does not serve (a new one) has neither. When lbplane cannot be asked, every endpoint
// counts as healthy, and stderr says why, once.
func (s *trafficSides) readFleet(ctx context.Context, g *globals, zoned bool, stderr io.Writer) {
	c, err := g.client()
	warn := func(err error) {
		fmt.Fprintf(stderr, "warning: what lbplane's Envoys report was not read (%v): every endpoint counts as healthy\n", err)
	}
	if err != nil {
		warn(err)
		return
	}
	s.fleet = func(k objkey.Key) (trafficmodel.Down, trafficmodel.Envoys, bool) {
		if c == nil {
			return nil, nil, false
		}
		l, err := c.Live(ctx, k.Namespace, k.Name)
		var api *pushclient.APIError
		switch {
		case errors.As(err, &api) && api.Status == http.StatusNotFound:
			return nil, nil, false
		case err != nil:
			warn(err)
			c = nil
			return nil, nil, false
		}
		var envoys trafficmodel.Envoys
		if !zoned && len(l.EnvoysByZone) > 0 {
			envoys = trafficmodel.EnvoysByZone(l.EnvoysByZone)
		}
		return l.Down, envoys, true
	}
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// gatewayPreview is a preview of one of a Gateway's policies, with what the policy serves.
type gatewayPreview struct {
	*trafficmodel.Preview
	Gateway *gatewayTrace `json:"gateway,omitempty"`
	gw      *gatewayPolicy
}

// printPreviews writes the traffic preview as tables: per route, each endpoint's share before and after;
// then the keys or sessions that move, and the failover steps of zone-failover backends.
func printPreviews(w io.Writer, pvs []*trafficmodel.Preview) {
	gpvs := make([]*gatewayPreview, len(pvs))
	for i, pv := range pvs {
		gpvs[i] = &gatewayPreview{Preview: pv}
	}
	printGatewayPreviews(w, gpvs)
}

// printGatewayPreviews is printPreviews, with a Gateway's policy under its Gateway, listener and host name,
// and each route's HTTPRoute rule.
func printGatewayPreviews(w io.Writer, gpvs []*gatewayPreview) {
	for i, gpv := range gpvs {
		pv := gpv.Preview
		if i > 0 {
			fmt.Fprintln(w)
		}
		if gpv.Gateway != nil {
			fmt.Fprintln(w, gpv.Gateway.header())
		}
		rule := func(route string) string { return "" }
		if gp := gpv.gw; gp != nil {
			rule = func(route string) string {
				i, ok := pv.SpecRoutes[route]
				if r := gp.ruleAt(&i); ok && r != nil {
					return strings.TrimPrefix(r.String(), "HTTPRoute ")
				}
				return "-"
			}
		}
		state := ""
		switch {
		case pv.Added:
			state = " (new policy)"
		case pv.Removed:
			state = " (no longer served)"
		}
		fmt.Fprintf(w, "Policy %s%s: predicted share of each route's requests\n", pv.Policy, state)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		if gpv.gw != nil {
			fmt.Fprintln(tw, "  ROUTE\tHTTPROUTE RULE\tBACKEND\tENDPOINT\tZONE\tLEVEL\tBEFORE\tAFTER\t")
		} else {
			fmt.Fprintln(tw, "  ROUTE\tBACKEND\tENDPOINT\tZONE\tLEVEL\tBEFORE\tAFTER\t")
		}
		for _, c := range pv.Changes {
			before, after := pct(c.Before), pct(c.After)
			if c.State == "added" || pv.Added {
				before = "-"
			}
			if c.State == "removed" || pv.Removed {
				after = "-"
			}
			route := c.Route
			if gpv.gw != nil {
				route += "\t" + rule(c.Route)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", route, c.Backend, c.Address, dash(c.Zone), levelName(c.Priority, c.Backup), before, after, c.State)
		}
		tw.Flush()
		if pv.Envoys != "" {
			fmt.Fprintf(w, "  (predicted for %s: zone-aware routing depends on the Envoy's zone)\n", pv.Envoys)
		}
		for _, b := range pv.Caveats {
			for _, c := range b.Caveats {
				fmt.Fprintf(w, "  (not predicted, backend %s: %s)\n", b.Backend, c)
			}
		}
		for _, m := range pv.Movements {
			route := m.Route
			if r := rule(m.Route); r != "" && r != "-" {
				route += ", HTTPRoute " + r
			}
			fmt.Fprintf(w, "  %s that move to another endpoint (%s, backend %s): %s\n", m.Kind, route, m.Backend, pct(m.Moved))
			if m.Note != "" {
				fmt.Fprintf(w, "    (%s)\n", m.Note)
			}
		}
		for _, f := range pv.Failover {
			var parts []string
			for _, l := range f.Load {
				to := zoneNames(l.Zones)
				if l.Backup {
					to = "the backups (" + to + ")"
				}
				parts = append(parts, fmt.Sprintf("%d%% to %s", l.Percent, to))
			}
			panic := ""
			if f.Panic {
				panic = " (panic: unhealthy endpoints get traffic too)"
			}
			fmt.Fprintf(w, "  if %s of backend %s loses %d of %d endpoints: %s%s\n", f.Zone, f.Backend, f.Lost, f.Of, strings.Join(parts, ", "), panic)
		}
	}
}

// levelName is a priority level as printed: its number, and "backup" for a level of backup endpoints.
func levelName(priority int, backup bool) string {
	if backup {
		return fmt.Sprintf("%d (backup)", priority)
	}
	return strconv.Itoa(priority)
}

func zoneNames(z []string) string {
	var out []string
	for _, s := range z {
		if s == "" {
			s = "(no zone)"
		}
		out = append(out, s)
	}
	return strings.Join(out, "+")
}

// trafficDiff is lbctl diff --traffic: offline against --from, or else asked of the server, which previews
// against what it serves.
// trafficDiff previews the traffic of file's change: against from (what runs, as a file), or asked of
// lbplane. running says that from was read from the cluster: the previews then read what lbplane's Envoys
// report of the policies that run.
func trafficDiff(cmd *cobra.Command, g *globals, from, file string, zone *string, out *outputFlags, running bool) error {
	var pvs []*trafficmodel.Preview
	var err error
	var gateways map[objkey.Key]*gatewayPolicy
	if from != "" {
		var s *trafficSides
		if s, err = offlineSides(from, file, cmd.InOrStdin(), cmd.ErrOrStderr()); err == nil {
			gateways = s.gateways
			if s.envoys, err = zoneEnvoys(zone); err == nil {
				if running {
					s.readFleet(cmd.Context(), g, zone != nil, cmd.ErrOrStderr())
				}
				pvs, err = s.previews()
			}
		}
	} else {
		var c *pushclient.Client
		if c, err = g.client(); err == nil {
			var body []byte
			var sources []string
			if body, sources, err = readBody(file, cmd.InOrStdin()); err == nil {
				if pvs, err = c.Traffic(cmd.Context(), body, zone); err != nil {
					err = renameSources(err, sources)
				}
			}
		}
	}
	if err != nil {
		return &exitCode{code: 2, err: err}
	}
	if pvs == nil {
		pvs = []*trafficmodel.Preview{}
	}
	p := printable{Object: pvs, Text: func(w io.Writer, _ bool) error { printPreviews(w, pvs); return nil }}
	if len(gateways) > 0 {
		// A Gateway's policy under its Gateway, listener and host name.
		gpvs := make([]*gatewayPreview, len(pvs))
		for i, pv := range pvs {
			gpvs[i] = &gatewayPreview{Preview: pv}
			if k, ok := objkey.Parse(pv.Policy); ok && gateways[k] != nil {
				gp := gateways[k]
				gpvs[i].Gateway, gpvs[i].gw = gp.trace(), gp
			}
		}
		p = printable{Object: gpvs, Text: func(w io.Writer, _ bool) error { printGatewayPreviews(w, gpvs); return nil }}
	}
	err = out.Print(cmd.OutOrStdout(), p)
	if err != nil {
		return &exitCode{code: 2, err: err}
	}
	if trafficChanges(pvs) {
		return &exitCode{code: 1}
	}
	return nil
}

// trafficChanges: some endpoint's share moves by more than rounding, or some keys move.
func trafficChanges(pvs []*trafficmodel.Preview) bool {
	for _, pv := range pvs {
		for _, c := range pv.Changes {
			if math.Abs(c.After-c.Before) > 0.0005 || c.State == "added" || c.State == "removed" {
				return true
			}
		}
		for _, m := range pv.Movements {
			if m.Moved > 0 {
				return true
			}
		}
	}
	return false
}

// dryRunTraffic prints the traffic preview after a successful dry run, as the server makes it. The dry
// run's verdict is what counts, so a preview that cannot be made is a warning, not a failure.
func dryRunTraffic(cmd *cobra.Command, c *pushclient.Client, body []byte) {
	// The body is what was sent, also when it came from standard input, which is read by now.
	pvs, err := c.Traffic(cmd.Context(), body, nil)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: no traffic preview: %v\n", err)
		return
	}
	fmt.Fprintln(cmd.OutOrStdout())
	printPreviews(cmd.OutOrStdout(), pvs)
}
