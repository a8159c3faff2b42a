package lbctl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/resdiff"
)

func newDiff(g *globals) *cobra.Command {
	var file, from, zone string
	var out *outputFlags
	var traffic bool
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|-",
		Short: "Show what pushing policies would change in Envoy's resources, field by field (exit 1 when something would)",
		Long: `Show, before pushing, which clusters, endpoints, listeners, routes and secrets would be added,
removed or changed, with the Envoy fields that change. Nothing is pushed.

In Kubernetes mode (--kubeconfig or --context) OLD is every LoadBalancerPolicy in the cluster, read
from the API server, and the comparison runs here, as with --from: Service endpoints and Secrets are not
resolved on either side, so a diff shows what the policies change, not endpoint churn.

Without --from the server compares what it serves with what it would serve after lbctl push-config of
the same files (standalone mode). With --from OLD it works offline: OLD is what runs, and FILE's
policies replace or join those of OLD.

With --traffic it shows the traffic instead: each endpoint's predicted share of every route before and
after, the fraction of hash keys (ring hash, Maglev) and sessions that move to another endpoint, where
zone-failover backends send traffic as their first zone loses endpoints, and what the model cannot
predict. It models Envoy's own algorithms (see lbctl trace). Without --from the server answers (in
Kubernetes mode too): before is what it serves, after what the push would serve, with the health its
Envoys report, for the zones of the proxy group's connected Envoys (--zone: for an Envoy in that zone);
nothing but the files' policies is sent or modelled. With --from it works offline, every endpoint healthy.

With --from, FILE and OLD may hold Gateway API objects (GatewayClass, Gateway, HTTPRoute, ReferenceGrant),
BackendLoadBalancerPolicies and the Services, EndpointSlices, Namespaces and TLS Secrets they name, as files
or as the List kubectl get -o yaml prints: the Gateways become policies as lbplane serve --gateway-api makes
them (see lbctl trace), and --traffic previews each of a Gateway's policies whose traffic the change moves,
under its Gateway, listener and host name, with the HTTPRoute rule of each route. Without --from, in
Kubernetes mode, a FILE of Gateway API objects is compared in the same way against what runs, read from
the cluster (its Gateway API objects, BackendLoadBalancerPolicies, LoadBalancerPolicies, Services,
EndpointSlices and Namespaces, and the Secrets its Gateways name), with what lbplane's Envoys report of each
Gateway policy that runs (the endpoints they find down, and their zones unless --zone is given); outside
Kubernetes mode it is refused: lbplane previews policies.

Exit status, as diff(1): 0 when nothing would change, 1 when something would, 2 on errors.`,
		Example: `  lbctl diff -f policy.yaml
  lbctl diff --from policies/ -f policies-next/
  lbctl diff -f policy.yaml -o json
  lbctl diff --traffic -f policy.yaml
  lbctl diff --traffic -f policy.yaml --zone zone-a
  lbctl diff --traffic --from running.yaml -f httproute.yaml
  lbctl --context prod diff --traffic -f httproute.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return &exitCode{code: 2, err: err}
			}
			running := false
			if from == "" {
				// The server previews policies; Gateway API objects are previewed here, against --from or, in
				// Kubernetes mode, against what runs in the cluster.
				stdin, kube, err := kubeObjectsIn(file, cmd.InOrStdin())
				if err != nil {
					return &exitCode{code: 2, err: err}
				}
				cmd.SetIn(stdin)
				if kube {
					if !g.kube.enabled() {
						return &exitCode{code: 2, err: fmt.Errorf("%s holds Kubernetes objects (Gateway API objects, Services...): lbplane previews policies, and lbctl previews these "+
							"against what runs: in Kubernetes mode (--kubeconfig or --context) it reads that from the cluster, or offline with "+
							"lbctl diff [--traffic] --from RUNNING -f %s, RUNNING the objects that run (kubectl get gatewayclasses,gateways,httproutes,referencegrants,services,endpointslices -A -o yaml > RUNNING)", file, file)}
					}
					c, err := g.kube.connect()
					if err != nil {
						return &exitCode{code: 2, err: err}
					}
					path, done, err := c.writeRunningGatewayObjects(cmd.Context())
					if err != nil {
						return &exitCode{code: 2, err: err}
					}
					defer done()
					from, running = path, true
				}
			}
			if traffic {
				return trafficDiff(cmd, g, from, file, zoneFlag(cmd, zone), out, running)
			}
			var changes []resdiff.Change
			var err error
			switch {
			case from != "":
				changes, err = offlineDiff(from, file, cmd.InOrStdin(), cmd.ErrOrStderr())
			case g.kube.enabled():
				changes, err = clusterDiff(cmd, g, file)
			default:
				changes, err = serverDiff(cmd, g, file)
			}
			if err != nil {
				return &exitCode{code: 2, err: err}
			}
			if changes == nil {
				changes = []resdiff.Change{}
			}
			names := make([]string, len(changes))
			for i, c := range changes {
				names[i] = strings.ToLower(c.Type) + "/" + c.Name
			}
			err = out.Print(cmd.OutOrStdout(), printable{Object: changes, Names: names,
				Text: func(w io.Writer, _ bool) error { printChanges(w, changes); return nil }})
			if err != nil {
				return &exitCode{code: 2, err: err}
			}
			if len(changes) > 0 {
				return &exitCode{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	cmd.Flags().StringVar(&from, "from", "", "compare offline against these policies (file or directory) instead of the server")
	out = addOutputFlags(cmd, "")
	cmd.Flags().BoolVar(&traffic, "traffic", false, "show each endpoint's predicted share and the hash keys and sessions that move, instead of resource changes")
	addZoneFlag(cmd, &zone)
	cmd.MarkFlagRequired("filename")
	return cmd
}

func serverDiff(cmd *cobra.Command, g *globals, file string) ([]resdiff.Change, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	body, sources, err := readBody(file, cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	res, err := c.Diff(cmd.Context(), body)
	if err != nil {
		return nil, renameSources(err, sources)
	}
	return res.Changes, nil
}

// offlineDiff compares from with from and file applied. Gateway API objects (and the Services they name)
// in either become policies first, as lbplane serve makes them.
func offlineDiff(from, file string, stdin io.Reader, stderr io.Writer) ([]resdiff.Change, error) {
	oldObjs, err := readOfflineObjects(from, nil)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	newObjs, err := readOfflineObjects(file, stdin)
	if err != nil {
		return nil, err
	}
	if oldObjs.kube() || newObjs.kube() {
		oldObjs.warn(stderr)
		newObjs.warn(stderr)
		return resdiff.Results(oldObjs.translate().res, oldObjs.replacedBy(newObjs).translate().res)
	}
	return diffDocs(oldObjs.docs, newObjs.docs, "--from")
}

// kubeObjectsIn reports whether file holds Kubernetes objects besides policies (Gateway API objects,
// Services...), which lbplane does not preview; it returns what reads file's standard input again.
func kubeObjectsIn(file string, stdin io.Reader) (io.Reader, bool, error) {
	var b []byte
	if file == "-" {
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, false, err
		}
		stdin = bytes.NewReader(b)
	}
	o, _ := readOfflineObjects(file, stdin)
	if b != nil {
		stdin = bytes.NewReader(b)
	}
	return stdin, o.kube(), nil
}

// clusterDiff is offlineDiff with the cluster's policies as what runs.
func clusterDiff(cmd *cobra.Command, g *globals, file string) ([]resdiff.Change, error) {
	c, err := g.kube.connect()
	if err != nil {
		return nil, err
	}
	items, err := c.List(cmd.Context(), "")
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's policies: %w", err)
	}
	newDocs, err := manifest.ReadPath(file, cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	oldDocs := make([]manifest.Document, 0, len(items))
	for _, p := range items {
		p.Status = v1alpha1.LoadBalancerPolicyStatus{}
		oldDocs = append(oldDocs, manifest.Document{Source: "cluster " + objkey.Of(p).String(), Policy: p})
	}
	return diffDocs(oldDocs, newDocs, "the cluster's policies")
}

func diffDocs(oldDocs, newDocs []manifest.Document, oldName string) ([]resdiff.Change, error) {
	// What a push does: the new documents replace policies of the same name, the others stay.
	replaced := map[objkey.Key]bool{}
	for _, d := range newDocs {
		replaced[objkey.Of(d.Policy)] = true
	}
	next := newDocs
	for _, d := range oldDocs {
		if !replaced[objkey.Of(d.Policy)] {
			next = append(next, d)
		}
	}
	before, errs := translateDocs(oldDocs, previewRules)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", oldName, errors.Join(errs...))
	}
	after, errs := translateDocs(next, previewRules)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return resdiff.Results(before, after)
}

func printChanges(w io.Writer, changes []resdiff.Change) {
	mark := map[string]string{resdiff.Added: "+", resdiff.Removed: "-", resdiff.Changed: "~"}
	for _, c := range changes {
		fmt.Fprintf(w, "%s %s %s (proxy group %s)\n", mark[c.Op], c.Type, c.Name, c.Group)
		for _, f := range c.Fields {
			switch {
			case f.Old == "":
				fmt.Fprintf(w, "    + %s: %s\n", f.Path, clipValue(f.New))
			case f.New == "":
				fmt.Fprintf(w, "    - %s: %s\n", f.Path, clipValue(f.Old))
			default:
				fmt.Fprintf(w, "    ~ %s: %s -> %s\n", f.Path, clipValue(f.Old), clipValue(f.New))
			}
		}
	}
}

// clipValue keeps a whole added sub-tree (a new filter chain, say) from flooding the output.
func clipValue(s string) string {
	const most = 200
	if len(s) <= most {
		return s
	}
	return s[:most] + fmt.Sprintf("... (%d more bytes; -o json has it all)", len(s)-most)
}
