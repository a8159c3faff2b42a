package lbctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushclient"
)

func newStatus(g *globals) *cobra.Command {
	var namespace string
	var w watchFlags
	var out *outputFlags
	var perProxy bool
	cmd := &cobra.Command{
		Use:   "status [NAME|gateway/NAME]",
		Short: "Show the connected Envoys, or one policy's backends: endpoint health and the last minute's load",
		Long: `Without NAME: every connected Envoy (one line per xDS stream). STATE is SYNCED when the Envoy
acknowledged everything it was sent and was sent the current config, STALE while it has not acknowledged
the current config yet, and NACKED when it rejected the last response of some type (MESSAGE says why; it
keeps running its previous config). With several replicas on etcd, the replica that answered, its role
and the number of clients of each live replica (as each published them, every 2 s) come first.

With NAME: the policy's conditions and, per backend, what its Envoys report: endpoints total, healthy
and ejected, the ejected ones with the reason (active health check failed, outlier detection:
consecutive 5xx, success rate, draining, ...), and requests, errors (5xx and connection failures) and
p99 latency over the last minute, summed over the Envoys. Envoys report through their stats port
(lbctl bootstrap --stats-port, on by default); lbplane reads it every --proxy-stats-interval.

Then, per endpoint (the ten busiest and every one not taking traffic): weight, requests per second
over the last reading, active requests, requests and error rate over the window, the share of the
backend's requests the traffic model expects it to get (from the config Envoy runs and the endpoints not
taking traffic: priority levels and backups, zone weights, the algorithm's spread) against the share it got, and health. Envoy keeps no
latency per endpoint, so P99 is per backend. SKEW is the coefficient of variation of observed over
expected share; with a hash algorithm a high one means a few keys carry most of the traffic.
--per-proxy adds each Envoy's own figures (GET /v1/policies/NAMESPACE/NAME/live); the dashboard
(lbctl dashboard) shows them too. A Gateway's policy (one per listener port and host name, named
gateway.GATEWAY.PORT.HASH) says which Gateway, listeners and host name it serves; gateway/NAME shows every
policy of the Gateway NAME, asked of lbplane (in Kubernetes mode too: they are not objects of the cluster).
-o json|yaml prints the policy as lbctl get NAME -o json|yaml does (.status holds what the table shows),
so a jsonpath or jq filter written for one works on the other.

--watch: with NAME, the screen is redrawn every --interval (the load moves all the time); without NAME,
and with -o json|yaml|..., the answer is printed again whenever it changes. Both end on Ctrl-C, or after
--watch-timeout.`,
		Example: `  lbctl status
  lbctl status -o wide
  lbctl status demo
  lbctl status demo -n shop -o json
  lbctl status demo --watch
  lbctl status demo --per-proxy
  lbctl status gateway/web -n shop`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if len(args) == 1 {
				tgt, err := parseTarget(args[0])
				if err != nil {
					return err
				}
				ns := g.namespaceFor(cmd, namespace)
				if tgt.gateway != "" {
					return gatewayStatus(cmd, g, &w, out, types.NamespacedName{Namespace: ns, Name: tgt.gateway}, perProxy)
				}
				src, err := g.policies()
				if err != nil {
					return err
				}
				var c *pushclient.Client
				if perProxy {
					if c, err = g.client(); err != nil {
						return err
					}
				}
				return w.run(cmd, out, func(ctx context.Context) (printable, error) {
					p, err := getPolicy(ctx, g, src, ns, tgt.policy)
					if err != nil {
						return printable{}, err
					}
					// The policy, as lbctl get NAME prints it, so that a jsonpath or jq filter works on both.
					return printable{Object: p, Names: []string{policyName(p.Name)},
						Text: func(w io.Writer, _ bool) error { return printStatusOf(ctx, w, c, p, perProxy) }}, nil
				})
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			return w.run(cmd, out, func(ctx context.Context) (printable, error) {
				proxies, err := c.Proxies(ctx)
				if err != nil {
					return printable{}, err
				}
				if proxies == nil {
					proxies = []apiwire.ProxyStatus{}
				}
				if out.isHuman() && !w.on {
					// The server's departures from the secure defaults, so that nobody runs one unaware.
					v, err := c.Version(ctx)
					if err == nil && len(v.Settings) > 0 {
						fmt.Fprintln(cmd.ErrOrStderr(), "Server settings that relax a default:")
						for _, s := range v.Settings {
							fmt.Fprintln(cmd.ErrOrStderr(), "  "+s)
						}
					}
					if err == nil && v.Store != nil {
						printStoreStatus(cmd.ErrOrStderr(), v.Store)
					}
				}
				if len(proxies) == 0 && out.isHuman() && !w.on {
					fmt.Fprintln(cmd.ErrOrStderr(), "No Envoy connected.")
				}
				names := make([]string, len(proxies))
				for i, p := range proxies {
					names[i] = "proxy/" + p.NodeID
				}
				return printable{Object: proxies, Names: names, Table: proxyTable(proxies)}, nil
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME (Kubernetes mode: the context's, unless given)")
	out = addOutputFlags(cmd, "")
	w.add(cmd)
	cmd.Flags().BoolVar(&perProxy, "per-proxy", false, "with NAME, also each Envoy's own per-endpoint figures")
	return cmd
}

func proxyTable(proxies []apiwire.ProxyStatus) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Node", Type: "string", Format: "name"},
		{Name: "Group", Type: "string"},
		{Name: "API", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Version", Type: "string"},
		{Name: "Current", Type: "string"},
		{Name: "Connected", Type: "string"},
		{Name: "Message", Type: "string"},
		{Name: "Address", Type: "string", Priority: 1},
		{Name: "Stats Port", Type: "integer", Priority: 1},
		{Name: "Authenticated", Type: "boolean", Priority: 1},
		{Name: "Responses", Type: "integer", Priority: 1},
		// envoy, or grpc for a proxyless gRPC client (served the group's gRPC profile), with its user agent.
		{Name: "Client", Type: "string", Priority: 1},
	}}
	for _, p := range proxies {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{p.NodeID, p.Group, p.API, p.State, dash(p.Version), p.Current,
			age(metav1.NewTime(p.ConnectedAt)), dash(p.Message), dash(p.Address), p.StatsPort, p.Authenticated, p.Responses, clientText(p)}})
	}
	return t
}

func clientText(p apiwire.ProxyStatus) string {
	if p.UserAgent == "" {
		return dash(p.Client)
	}
	return fmt.Sprintf("%s (%s)", dash(p.Client), p.UserAgent)
}

func printPolicyStatus(w io.Writer, p *v1alpha1.LoadBalancerPolicy) error {
	st := p.Status
	fmt.Fprintf(w, "Policy %s/%s (generation %d)\n", p.Namespace, p.Name, p.Generation)
	if sv, ok := gatewayapi.ServedBy(p); ok {
		fmt.Fprintf(w, "  %-13s %s\n", "Gateway", servedText(sv))
	}
	for _, t := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionResolvedRefs, v1alpha1.ConditionProgrammed, v1alpha1.ConditionReady, v1alpha1.ConditionRolledBack} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			fmt.Fprintf(w, "  %-13s %-5s %s: %s\n", t, c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintf(w, "  Proxies       %d connected, %d synced\n", st.Proxies.Connected, st.Proxies.Synced)
	if r := st.Rollout; r != nil {
		fmt.Fprintf(w, "  Rollout       %s\n", rolloutLine(&apiwire.RolloutResult{Policy: objkey.Of(p).String(), Rollout: *r}))
	}
	printOverrides(w, st.EndpointOverrides)
	fmt.Fprintln(w)
	if len(st.Backends) == 0 {
		fmt.Fprintln(w, noBackendHealth(st))
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "BACKEND\tPROXIES\tENDPOINTS\tHEALTHY\tEJECTED\tREQUESTS\tERRORS\tP99\tWINDOW")
		earlier := false
		for _, b := range st.Backends {
			p99 := latencyText(b.LatencyP99Ms)
			if b.Requests == 0 && b.LatencyP99Ms != nil {
				p99 += " (earlier)"
				earlier = true
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", b.Name, b.Proxies, b.Endpoints.Total, b.Endpoints.Healthy,
				b.Endpoints.Ejected, b.Requests, b.Errors, p99, time.Duration(b.WindowSeconds)*time.Second)
		}
		tw.Flush()
		if earlier {
			fmt.Fprintln(w, "P99 (earlier): no request in the window; the latency is that of the requests before it, since the Envoys' last full stats read.")
		}
		printEndpoints(w, p, st.Backends)
		var rows []string
		for _, b := range st.Backends {
			for _, e := range b.Ejected {
				rows = append(rows, fmt.Sprintf("%s\t%s\t%d of %d\t%s", b.Name, e.Address, e.Proxies, b.Proxies, strings.Join(e.Reasons, "; ")))
			}
		}
		if len(rows) > 0 {
			fmt.Fprintln(w)
			tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "BACKEND\tEJECTED ENDPOINT\tON PROXIES\tREASON")
			for _, r := range rows {
				fmt.Fprintln(tw, r)
			}
			tw.Flush()
		}
		printPerEnvoy(w, st.Backends)
	}
	if len(st.Warnings) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Warnings (lbctl lint explains each):")
		for _, x := range st.Warnings {
			fmt.Fprintln(w, "  "+x)
		}
	}
	return nil
}

// endpointHealth is the HEALTH column: the counted view, and what the Envoys that differ say.
func endpointHealth(e v1alpha1.EndpointStatus, proxies int32) string {
	of := e.ReportedBy
	if of == 0 {
		of = proxies
	}
	switch {
	case e.Health == v1alpha1.EndpointUnknown && e.UnknownSince != nil:
		return "unknown since " + e.UnknownSince.Local().Format(time.TimeOnly) + " (passive checks only: no request answered since its ejection lapsed)"
	case e.EjectedOn == 0:
		return "healthy"
	case e.Health == v1alpha1.EndpointEjected && e.EjectedOn == of:
		return fmt.Sprintf("ejected on %d of %d: %s", e.EjectedOn, of, strings.Join(e.Reasons, "; "))
	case e.Health == v1alpha1.EndpointEjected:
		return fmt.Sprintf("ejected on %d of %d (Envoys disagree): %s", e.EjectedOn, of, strings.Join(e.Reasons, "; "))
	default:
		return fmt.Sprintf("healthy on %d of %d (Envoys disagree; ejected on %d: %s)", of-e.EjectedOn, of, e.EjectedOn, strings.Join(e.Reasons, "; "))
	}
}

// printPerEnvoy prints each Envoy's own endpoint counts per backend when more than one Envoy reports, and
// the endpoints they disagree on: one Envoy's report counts for its own row, and for the backend only with
// a majority.
func printPerEnvoy(w io.Writer, backends []v1alpha1.BackendStatus) {
	multi, mismatched := false, false
	for _, b := range backends {
		multi = multi || len(b.PerProxy) > 1
		mismatched = mismatched || len(b.Mismatches) > 0
	}
	if !multi && !mismatched {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tENVOY\tENDPOINTS\tHEALTHY\tEJECTED\tAGREES")
	for _, b := range backends {
		for _, p := range b.PerProxy {
			agrees := "yes"
			if p.Mismatch {
				agrees = "NO"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", b.Name, p.Node, p.Endpoints.Total, p.Endpoints.Healthy, p.Endpoints.Ejected, agrees)
		}
	}
	tw.Flush()
	if !mismatched {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The Envoys disagree on these endpoints; the counts above take the majority's view (an ejection by half or fewer is not counted):")
	tw = tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tENDPOINT\tCOUNTED AS\tEJECTED ON\tHEALTHY ON\tREASON")
	for _, b := range backends {
		for _, m := range b.Mismatches {
			counted := "healthy"
			if m.Counted {
				counted = "ejected"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.Name, m.Address, counted, strings.Join(m.EjectedOn, ","),
				strings.Join(m.HealthyOn, ","), strings.Join(m.Reasons, "; "))
		}
	}
	tw.Flush()
}

// SkewHint is the skew above which a hash backend gets a hint: shares off their weight by a third on average.
const SkewHint = 0.33

// printEndpoints prints each backend's per-endpoint load and, for hash algorithms, a hint on a high skew.
func printEndpoints(w io.Writer, p *v1alpha1.LoadBalancerPolicy, backends []v1alpha1.BackendStatus) {
	listed := false
	for _, b := range backends {
		listed = listed || len(b.PerEndpoint) > 0
	}
	if !listed {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tENDPOINT\tZONE\tLEVEL\tWEIGHT\tRPS\tACTIVE\tREQUESTS\tERRORS\tEXPECTED\tOBSERVED\tHEALTH")
	for _, b := range backends {
		for _, e := range b.PerEndpoint {
			health := endpointHealth(e, b.Proxies)
			if e.WarmingPercent != nil {
				health += fmt.Sprintf(", warming: %d %% of full weight", *e.WarmingPercent)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", b.Name, e.Address, dash(e.Zone), levelName(int(e.Priority), e.Backup), e.Weight, rpsText(e.RequestsPerSecond),
				e.ActiveRequests, e.Requests, percentText(e.ErrorRate), percentText(&e.ExpectedShare), percentText(e.ObservedShare), health)
		}
	}
	tw.Flush()
	for _, b := range backends {
		for _, c := range b.ExpectedCaveats {
			fmt.Fprintf(w, "(not predicted, backend %s: %s)\n", b.Name, c)
		}
	}
	for _, b := range backends {
		if b.Skew == nil {
			continue
		}
		fmt.Fprintf(w, "%s: skew %.2f", b.Name, *b.Skew)
		if hint := skewHint(p, b); hint != "" {
			fmt.Fprintf(w, " (high: %s)", hint)
		}
		fmt.Fprintln(w)
	}
}

// skewHint explains a high skew on a hash backend; "" when the skew is low or the algorithm does not hash.
func skewHint(p *v1alpha1.LoadBalancerPolicy, b v1alpha1.BackendStatus) string {
	if b.Skew == nil || *b.Skew < SkewHint {
		return ""
	}
	for _, sb := range p.Spec.Backends {
		if sb.Name != b.Name {
			continue
		}
		switch sb.LoadBalancing.Algorithm {
		case v1alpha1.AlgorithmRingHash:
			return "a few hash keys carry most requests, or the ring is too small for the endpoints (raise ringHash.minimumRingSize, or use Maglev)"
		case v1alpha1.AlgorithmMaglev:
			return "a few hash keys carry most requests (hash on a key with more distinct values)"
		}
	}
	return ""
}

// latencyText prints a latency in milliseconds as a duration ("77ms", "5.5ms", "1.23s"), "-" when unset.
// noBackendHealth says why a policy's status has no backend figures yet: no Envoy of its group connected, or
// none read yet (lbplane reads the Envoys' stats ports every --proxy-stats-interval, so right after the first
// requests), or, only then, Envoys without a stats port.
func noBackendHealth(st v1alpha1.LoadBalancerPolicyStatus) string {
	if st.Proxies.Connected == 0 {
		return fmt.Sprintf("No backend health reported: no Envoy of proxy group %q is connected.", st.ProxyGroup)
	}
	return fmt.Sprintf("No backend health reported yet: lbplane reads each of the %d connected Envoys' stats port every --proxy-stats-interval, "+
		"and shows the backends after the first reads. An Envoy started without a stats port (lbctl bootstrap --stats-port 0) never reports.", st.Proxies.Connected)
}

func latencyText(ms *float64) string {
	if ms == nil {
		return "-"
	}
	return time.Duration(*ms * float64(time.Millisecond)).String()
}

// percentText prints a fraction as a percentage with one decimal ("33.4%"), "-" when unset.
func percentText(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(100**f, 'f', 1, 64) + "%"
}

// rpsText prints requests per second with one decimal.
func rpsText(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// watchStatus redraws print's output every interval until ctx ends: each frame is rendered whole first,
// then the screen is cleared and the frame written, so that it does not flicker. A failed read is shown in
// place of the frame and the watch goes on (lbplane restarting, a network blip). Into a pipe or a file, where
// clear-screen codes are noise, each frame follows the last under its time line instead.
func watchStatus(ctx context.Context, w io.Writer, interval time.Duration, print func(io.Writer) error) error {
	return watchFrames(ctx, w, isTerminal(w), interval, print)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func watchFrames(ctx context.Context, w io.Writer, terminal bool, interval time.Duration, print func(io.Writer) error) error {
	if interval <= 0 {
		return errors.New("--interval must be positive")
	}
	clear, gap := "", ""
	if terminal {
		clear = "\x1b[H\x1b[2J"
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var frame bytes.Buffer
		if err := print(&frame); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			frame.Reset()
			fmt.Fprintf(&frame, "error: %v\n", err)
		}
		fmt.Fprintf(w, "%s%s%s (every %s)\n\n%s", gap, clear, time.Now().Format(time.TimeOnly), interval, frame.Bytes())
		if !terminal {
			gap = "\n"
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// printStoreStatus says which replica answered, its role, and whether it is cut off from the shared store.
func printStoreStatus(w io.Writer, st *apiwire.StoreStatus) {
	fmt.Fprintf(w, "Store: %s, replica %s, role %s", st.Kind, st.Replica, st.Role)
	if st.Stale {
		fmt.Fprintf(w, ", STALE since %s: cut off from %s, serving its last good state and refusing pushes", st.StaleSince.UTC().Format(time.RFC3339), st.Kind)
	}
	fmt.Fprintln(w)
	if len(st.Clients) > 0 {
		fmt.Fprint(w, "  clients per replica:")
		for i, id := range slices.Sorted(maps.Keys(st.Clients)) {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s %d", sep, id, st.Clients[id])
			if id == st.Replica {
				fmt.Fprint(w, " (this one)")
			}
		}
		fmt.Fprintln(w)
	}
	for _, g := range slices.Sorted(maps.Keys(st.Versions)) {
		fmt.Fprintf(w, "  group %s: config version %s\n", g, st.Versions[g])
	}
	if n := len(st.Refused); n > 0 {
		fmt.Fprintf(w, "  REFUSED: %d record(s) in %s that lbplane did not write, not served (delete them, or push the policy again):\n", n, st.Kind)
		const shown = 10
		for _, r := range st.Refused[:min(n, shown)] {
			fmt.Fprintf(w, "    %s (revision %d, since %s): %s\n", r.Key, r.ModRevision, r.Since.UTC().Format(time.RFC3339), r.Reason)
		}
		if n > shown {
			fmt.Fprintf(w, "    and %d more\n", n-shown)
		}
	}
}
