package lbctl

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/controlplane/trafficmodel"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// offlinePolicy finds the policy namespace/name in the files' set (lbctl trace, whatif -f).
func offlinePolicy(set *offlineSet, file, namespace, name string) (*translate.Result, *v1alpha1.LoadBalancerPolicy, error) {
	if p := set.policy(namespace, name); p != nil {
		return set.res, p, nil
	}
	return nil, nil, fmt.Errorf("policy %s is not in %s", objkey.Key{Namespace: namespace, Name: name}, file)
}

// offlineModel models the policy namespace/name of res with every endpoint healthy but those p.Down names,
// the endpoints p.Joined names warming up p.At after they joined, for an Envoy in p.Zone (one without a
// zone when nil).
func offlineModel(res *translate.Result, namespace, name string, p apiwire.Predict) (*trafficmodel.Policy, error) {
	down, err := addDowns(res, namespace, name, trafficmodel.Down{}, p.Down)
	if err != nil {
		return nil, err
	}
	ages, err := trafficmodel.JoinedAges(res.IR, namespace, name, p.Joined, p.At)
	if err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	m, err := trafficmodel.ForPolicy(res.IR, namespace, name, down)
	if err != nil {
		return nil, err
	}
	e, err := zoneEnvoys(p.Zone)
	if err != nil {
		return nil, err
	}
	return m.From(e).Joined(ages), nil
}

// addJoinedFlags adds --joined and --at to a prediction's flags.
func addJoinedFlags(cmd *cobra.Command, joined *[]string, at *string) {
	cmd.Flags().StringArrayVar(joined, "joined", nil, "endpoints that joined --at ago, warming up as the backend's slowStart ramps them: zone=NAME or endpoint=ADDRESS[:PORT] (repeatable)")
	cmd.Flags().StringVar(at, "at", "", "with --joined: how long ago they joined, e.g. 30s (default 0s)")
}

// zoneEnvoys is an Envoy in zone as lbctl bootstrap --zone makes it; none when zone is nil.
func zoneEnvoys(zone *string) (trafficmodel.Envoys, error) {
	if zone == nil {
		return nil, nil
	}
	return trafficmodel.EnvoysIn(*zone)
}

// zoneFlag is --zone when it is given, "" included (an Envoy without a zone); nil when it is not.
func zoneFlag(cmd *cobra.Command, value string) *string {
	if !cmd.Flags().Changed("zone") {
		return nil
	}
	return &value
}

// addZoneFlag adds --zone to a prediction's flags.
func addZoneFlag(cmd *cobra.Command, value *string) {
	cmd.Flags().StringVar(value, "zone", "", `predict for an Envoy in this zone (lbctl bootstrap --zone; "" for one without); default: the proxy group's connected Envoys, or with -f an Envoy without a zone`)
}

func newTrace(g *globals) *cobra.Command {
	var namespace, file, path, clientIP, envoyURL, zone string
	var output *outputFlags
	var headers, cookies, downs, joined []string
	var at string
	var live bool
	cmd := &cobra.Command{
		Use:   "trace NAME|gateway/NAME [URL]",
		Short: "Follow one request through a policy: the route, the backend, the hash key and the endpoint that owns it",
		Long: `Answer "where does this request go, and why" without sending it: the route it matches and why the
earlier ones do not, the backends with their weights, the request's hash (each input and its value) and
the endpoint that owns it on the ring or in the Maglev table, a session cookie or header that pins it,
the priority level (zone) the current health picks, panic mode, and the endpoints skipped as down.

It computes Envoy's own algorithms on the resources lbplane serves for the policy (xxHash64 of the hash
inputs as the route's hash policy takes them, the ring of "address:port_N" hashes, the Maglev table,
priority load with the endpoints' overprovisioning factor, backup endpoints, zone weights, zone-aware
routing, the panic threshold). Where Envoy's pick for one request cannot be known (round robin's turn, a
random pick) it says so and gives the chances; what the model cannot predict (least request under
concurrent load, say) it names. The server answers from what it serves: health is what lbplane last read
from its Envoys' /clusters, and zone-aware backends are predicted for the zones of the policy's proxy
group's connected Envoys (--zone: for an Envoy in that zone). With -f it works offline on files, every
endpoint healthy unless --down says otherwise, for an Envoy without a zone unless --zone names one.

A Gateway's request is traced with gateway/NAME (in -n's namespace) and its URL, http://HOST[:PORT]/PATH
(or https://): PORT is the Gateway listener's (80 or 443 unless given; without a URL, the Gateway's
only port, and the host of --header host=...), HOST the request's host name. lbplane made one policy of
each listener port and host name of the Gateway; the trace takes the one Envoy picks for HOST (the name
itself, else the most specific wildcard that covers it, else the one for every other name) and names the
Gateway, its listener, and the HTTPRoute rule and match each route was made of. Without such a policy it
says why: no such Gateway, no listener on that port, or the host name is not served (Envoy answers 404).
With -f the files may hold Gateway API objects (GatewayClass, Gateway, HTTPRoute, ReferenceGrant),
BackendLoadBalancerPolicies, and the Services, EndpointSlices, Namespaces and TLS Secrets they name: the
Gateways become policies as lbplane serve --gateway-api makes them (its default flags), a GatewayClass
the files do not hold is taken to be lbplane's, and a Service's endpoints are its EndpointSlices'.

--live also sends the request through Envoy (the policy's listener, or --envoy URL) and reads the
endpoint Envoy chose from the x-lbplane-upstream response header, which the policy adds with
spec.debugHeaders: true. It says whether Envoy agrees, and exits 1 when it does not; without debug
headers the answer is "unknown" (exit 0). --client-ip
with --live must be a local address (any 127.0.0.0/8 address on loopback) to send from.`,
		Example: `  lbctl trace shop --path /cart --header x-user=alice
  lbctl trace shop --client-ip 10.1.2.3 -f shop.yaml
  lbctl trace shop --cookie sticky=MTI3LjAuMC4xOjgwODE= --live
  lbctl trace shop --zone zone-a
  lbctl trace shop --header x-user=bob --down zone=zone-a -o json
  lbctl trace gateway/web -n shop http://shop.example.com/api/cart
  lbctl trace gateway/web -n shop http://shop.example.com:8080/ -f gateway.yaml`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeModelNames(g, &file, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.check(); err != nil {
				return err
			}
			tgt, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			if len(args) == 2 && tgt.gateway == "" {
				return fmt.Errorf("a request URL goes with gateway/NAME; a policy's request is --path and --header host=NAME")
			}
			req, err := traceRequest(path, headers, cookies, clientIP)
			if err != nil {
				return err
			}
			ns := g.namespaceFor(cmd, namespace)
			p := apiwire.Predict{Down: downs, Zone: zoneFlag(cmd, zone), Joined: joined, At: at}
			var set *offlineSet
			if file != "" {
				if set, err = readOffline(file, cmd.InOrStdin(), cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			name := tgt.policy
			var gp *gatewayPolicy
			if tgt.gateway != "" {
				if gp, req, err = gatewayTraceTarget(cmd, g, set, file, types.NamespacedName{Namespace: ns, Name: tgt.gateway}, args[1:], req); err != nil {
					return err
				}
				name = gp.policy.Name
			}
			var ans *pushclient.TraceAnswer
			if set != nil {
				ans, err = offlineTrace(set, file, ns, name, req, p)
			} else {
				var c *pushclient.Client
				if c, err = g.client(); err == nil {
					ans, err = c.Trace(cmd.Context(), ns, name, apiwire.TraceRequest{Path: req.Path, Headers: req.Headers, ClientIP: req.ClientIP,
						Predict: p})
				}
			}
			if err != nil {
				return err
			}
			out := &traceOutput{Trace: ans.Trace}
			if gp != nil {
				out.Gateway, out.gw = gp.trace(), gp
				out.Gateway.Rule = gp.ruleAt(ans.Trace.SpecRoute)
			}
			if live {
				out.Live = liveTrace(cmd.Context(), ans.Target, envoyURL, req, out.Trace)
			}
			err = output.Print(cmd.OutOrStdout(), printable{Object: out, Names: []string{policyName(name)},
				Text: func(w io.Writer, _ bool) error { printTrace(w, out); return nil }})
			if err != nil {
				return err
			}
			// Exit 1 when Envoy chose otherwise, or could not be asked although the policy lets it say; a
			// policy without debug headers answers unknown, which is no failure.
			if out.Live != nil && out.Live.Verdict != verdictAgrees && (out.Live.Verdict == verdictDiffers || ans.Target.DebugHeaders) {
				return &exitCode{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace of NAME (Kubernetes mode: the context's, unless given)")
	f.StringVarP(&file, "filename", "f", "", "trace against these files offline instead of asking the server (policies, or Gateway API objects and the Services they name)")
	f.StringVar(&path, "path", "/", "request path, with its query string (with gateway/NAME, the URL's)")
	f.StringArrayVar(&headers, "header", nil, "request header NAME=VALUE (repeatable)")
	f.StringArrayVar(&cookies, "cookie", nil, "request cookie NAME=VALUE (repeatable)")
	f.StringVar(&clientIP, "client-ip", "", "the client's address, for source IP hashing")
	f.StringArrayVar(&downs, "down", nil, "also take endpoints down: zone=NAME or endpoint=ADDRESS[:PORT] (repeatable)")
	addJoinedFlags(cmd, &joined, &at)
	f.BoolVar(&live, "live", false, "also send the request through Envoy and compare the endpoint it chose")
	f.StringVar(&envoyURL, "envoy", "", "with --live: Envoy's URL for the policy (default: http://LISTENER-ADDRESS:PORT)")
	addZoneFlag(cmd, &zone)
	output = addOutputFlags(cmd, "")
	return cmd
}

// offlineTrace traces req through the policy namespace/name of the files' set.
func offlineTrace(set *offlineSet, file, namespace, name string, req trafficmodel.Request, pr apiwire.Predict) (*pushclient.TraceAnswer, error) {
	res, p, err := offlinePolicy(set, file, namespace, name)
	if err != nil {
		return nil, err
	}
	m, err := offlineModel(res, namespace, name, pr)
	if err != nil {
		return nil, err
	}
	l := p.Spec.Listener
	return &pushclient.TraceAnswer{Trace: m.TraceRequest(req),
		Target: apiwire.TraceTarget{Address: l.Address, Port: l.Port, Protocol: string(l.Protocol), DebugHeaders: p.Spec.DebugHeaders}}, nil
}

func addDowns(res *translate.Result, namespace, name string, down trafficmodel.Down, downs []string) (trafficmodel.Down, error) {
	sels, err := trafficmodel.ParseSelectors(downs)
	if err != nil {
		return nil, fmt.Errorf("--down %w", err)
	}
	if len(sels) == 0 {
		return down, nil
	}
	out, err := trafficmodel.WithDown(res.IR, namespace, name, down, sels)
	if err != nil {
		return nil, fmt.Errorf("--down: %w", err)
	}
	return out, nil
}

func traceRequest(path string, headers, cookies []string, clientIP string) (trafficmodel.Request, error) {
	r := trafficmodel.Request{Path: path, Headers: map[string][]string{}, ClientIP: clientIP}
	if !strings.HasPrefix(path, "/") {
		return r, fmt.Errorf("--path must start with /, got %q", path)
	}
	if clientIP != "" && net.ParseIP(clientIP) == nil {
		return r, fmt.Errorf("--client-ip: %q is not an IP address", clientIP)
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return r, fmt.Errorf("--header %q: want NAME=VALUE", h)
		}
		k = strings.ToLower(k)
		r.Headers[k] = append(r.Headers[k], v)
	}
	var cs []string
	for _, c := range cookies {
		if k, _, ok := strings.Cut(c, "="); !ok || k == "" {
			return r, fmt.Errorf("--cookie %q: want NAME=VALUE", c)
		}
		cs = append(cs, c)
	}
	if len(cs) > 0 {
		r.Headers["cookie"] = append(r.Headers["cookie"], strings.Join(cs, "; "))
	}
	return r, nil
}

type traceOutput struct {
	*trafficmodel.Trace
	// Gateway is the Gateway, listener and HTTPRoute rule of a trace of gateway/NAME.
	Gateway *gatewayTrace `json:"gateway,omitempty"`
	Live    *liveResult   `json:"live,omitempty"`
	gw      *gatewayPolicy
}

type liveResult struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	// Upstream is the endpoint Envoy chose (x-lbplane-upstream).
	Upstream string `json:"upstream,omitempty"`
	// Verdict is Agrees, Differs, or Unknown when Envoy was not asked which endpoint it chose (the policy
	// has no debug headers) or could not be reached.
	Verdict string `json:"verdict"`
	Agrees  bool   `json:"agrees"`
	Why     string `json:"why"`
}

// Live verdicts.
const (
	verdictAgrees  = "Agrees"
	verdictDiffers = "Differs"
	verdictUnknown = "Unknown"
)

// liveTrace sends the request through Envoy at target (the policy's listener) and compares its pick with
// the predicted answer: the same endpoint when the answer is certain (a hash owner, a session), one of the
// candidates otherwise.
func liveTrace(ctx context.Context, target apiwire.TraceTarget, envoyURL string, r trafficmodel.Request, t *trafficmodel.Trace) *liveResult {
	if envoyURL == "" {
		host := target.Address
		if host == "" || host == "0.0.0.0" {
			host = "127.0.0.1"
		}
		envoyURL = "http://" + net.JoinHostPort(host, strconv.Itoa(int(target.Port)))
		if target.Protocol == string(v1alpha1.ProtocolHTTPS) {
			envoyURL = strings.Replace(envoyURL, "http://", "https://", 1)
		}
	}
	lr := &liveResult{URL: strings.TrimSuffix(envoyURL, "/") + r.Path, Verdict: verdictUnknown}
	if !target.DebugHeaders {
		lr.Why = "the policy does not set spec.debugHeaders: true, so Envoy does not say which endpoint it chose; set it to compare"
		return lr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lr.URL, nil)
	if err != nil {
		lr.Why = err.Error()
		return lr
	}
	for k, vs := range r.Headers {
		for _, v := range vs {
			if k == "host" {
				req.Host = v
				continue
			}
			req.Header.Add(k, v)
		}
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if r.ClientIP != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(r.ClientIP)}, Timeout: 5 * time.Second}
		tr.DialContext = d.DialContext
	}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		lr.Why = "sending: " + err.Error()
		return lr
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	lr.Status = resp.StatusCode
	lr.Upstream = resp.Header.Get(v1alpha1.UpstreamHostHeader)
	lr.Agrees, lr.Why = agreement(t, lr.Upstream)
	lr.Verdict = verdictDiffers
	if lr.Agrees {
		lr.Verdict = verdictAgrees
	}
	return lr
}

func agreement(t *trafficmodel.Trace, upstream string) (bool, string) {
	if t.Route == "" {
		if upstream == "" {
			return true, "no route matches, and Envoy sent the request nowhere"
		}
		return false, "no route matches offline, but Envoy sent the request to " + upstream
	}
	if upstream == "" {
		return false, "Envoy named no endpoint (no route, no healthy endpoint, or a local reply)"
	}
	var certain []string
	for _, b := range t.Backends {
		if b.Endpoint != "" {
			certain = append(certain, b.Endpoint)
		}
		for _, c := range b.Candidates {
			if c.Address == upstream {
				return true, "Envoy chose " + upstream + ", one of the offline candidates"
			}
		}
	}
	for _, c := range certain {
		if c == upstream {
			return true, "Envoy chose " + upstream + ", as predicted"
		}
	}
	for _, b := range t.Backends {
		if b.ResolvedByEnvoy {
			return true, "Envoy chose " + upstream + ": backend " + b.Backend + " has host names Envoy resolves at run time, whose addresses are not known offline"
		}
	}
	if len(certain) > 0 {
		return false, fmt.Sprintf("Envoy chose %s; offline predicted %s", upstream, strings.Join(certain, " or "))
	}
	return false, "Envoy chose " + upstream + ", which is not among the offline candidates"
}

func printTrace(w io.Writer, out *traceOutput) {
	t := out.Trace
	if out.Gateway != nil {
		fmt.Fprintln(w, out.Gateway.header())
	}
	fmt.Fprintf(w, "Policy %s\n", t.Policy)
	if t.Envoys != "" {
		fmt.Fprintf(w, "Predicted for %s (zone-aware routing depends on the Envoy's zone)\n", t.Envoys)
	}
	if out.gw != nil && len(t.Earlier) == len(t.Missed) {
		for _, m := range t.Earlier {
			fmt.Fprintf(w, "  route %s%s: %s\n", m.Route, ruleText(out.gw.ruleAt(m.SpecRoute)), strings.Join(m.Why, "; "))
		}
	} else {
		for _, m := range t.Missed {
			fmt.Fprintf(w, "  route %s\n", m)
		}
	}
	if t.Route == "" {
		fmt.Fprintln(w, "No route matches: Envoy answers 404.")
	} else {
		fmt.Fprintf(w, "Route %s matches: %s\n", t.Route, strings.Join(t.Why, "; "))
		switch {
		case out.Gateway == nil:
		case out.Gateway.Rule != nil:
			fmt.Fprintf(w, "  made of %s\n", out.Gateway.Rule)
		default:
			fmt.Fprintf(w, "  made of no HTTPRoute rule: no HTTPRoute attached to the Gateway serves host name %s on port %d\n", hostLabel(out.Gateway.Hostname), out.Gateway.Port)
		}
	}
	if h := t.Hash; h != nil {
		switch {
		case h.Present:
			fmt.Fprintf(w, "Hash %d (0x%016x):\n", h.Value, h.Value)
		case h.Generated:
			fmt.Fprintln(w, "Hash: unknown offline: Envoy sets the hash cookie from the connection's addresses, hashes it, and the client's next requests carry it")
		default:
			fmt.Fprintln(w, "Hash: no hash input is in the request, so Envoy picks at random")
		}
		for _, p := range h.Parts {
			if p.Missing {
				gen := ""
				if p.Generated {
					gen = " (Envoy generates it)"
				}
				fmt.Fprintf(w, "  %s: absent%s\n", p.Source, gen)
			} else {
				fmt.Fprintf(w, "  %s = %q -> xxHash64 %d\n", p.Source, p.Value, p.Hash)
			}
		}
	}
	if t.Answer != "" {
		fmt.Fprintf(w, "No backend: %s.\n", t.Answer)
	}
	if s := t.Session; s != nil {
		fmt.Fprintf(w, "Session %s %s: %s\n", s.Kind, s.Name, s.Why)
	}
	for _, b := range t.Backends {
		if b.Backend == "" && b.Algorithm == "" { // the error share: no cluster, no endpoint
			fmt.Fprintf(w, "Error share: weight %d (%.1f%% of the route): %s\n", b.Weight, 100*b.Probability, b.Note)
			continue
		}
		fmt.Fprintf(w, "Backend %s: weight %d (%.1f%% of the route), %s\n", b.Backend, b.Weight, 100*b.Probability, b.Algorithm)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  LEVEL\tZONES\tHEALTHY\tAVAILABILITY\tLOAD\tPANIC")
		for _, l := range b.Levels {
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%d%%\t%d%%\t%v\n", levelName(l.Priority, l.Backup), zoneNames(l.Zones), l.Healthy, l.Total, l.Availability, l.Load, l.Panic)
		}
		tw.Flush()
		if b.TotalPanic {
			fmt.Fprintln(w, "  every level is in panic: traffic goes to every endpoint, healthy or not")
		}
		for _, s := range b.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", s.Address, s.Reason)
		}
		if b.Note != "" {
			fmt.Fprintf(w, "  (%s)\n", b.Note)
		}
		for _, c := range b.Caveats {
			fmt.Fprintf(w, "  (not predicted: %s)\n", c)
		}
		switch {
		case b.Owner != "":
			panic := ""
			if b.Panic {
				panic = " (the level is in panic)"
			}
			fmt.Fprintf(w, "  the hash picks level %d and endpoint %s%s\n", *b.Level, b.Owner, panic)
		case b.Endpoint != "":
			fmt.Fprintf(w, "  the session sends it to %s\n", b.Endpoint)
		default:
			if b.Unpredictable != "" {
				fmt.Fprintf(w, "  (%s)\n", b.Unpredictable)
			}
			for _, c := range b.Candidates {
				fmt.Fprintf(w, "  %s: %.1f%%\n", c.Address, 100*c.Probability)
			}
			if len(b.Candidates) == 0 {
				fmt.Fprintln(w, "  no endpoint can take it: Envoy answers 503")
			}
		}
	}
	if l := out.Live; l != nil {
		if l.Verdict == verdictUnknown {
			fmt.Fprintf(w, "Live (%s): unknown: %s\n", l.URL, l.Why)
			return
		}
		fmt.Fprintf(w, "Live (%s): status %d, upstream %q: %s (%s)\n", l.URL, l.Status, l.Upstream, strings.ToUpper(l.Verdict), l.Why)
	}
}
