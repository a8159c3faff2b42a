package lbctl

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

func newBootstrap() *cobra.Command {
	p := envoybootstrap.Params{}
	var tls envoybootstrap.TLS
	cmd := &cobra.Command{
		Use:   "bootstrap --node-id ID",
		Short: "Print an Envoy bootstrap that gets its config from lbplane",
		Example: `  lbctl bootstrap --node-id envoy-1 > envoy.yaml && envoy -c envoy.yaml
  lbctl bootstrap --node-id edge-1 --proxy-group edge --xds-address lbplane.internal:18000
  lbctl bootstrap --node-id envoy-1 | envoy -c /dev/stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tls.Cert != "" || tls.Key != "" || tls.CA != "" {
				p.TLS = &tls
			}
			b, err := envoybootstrap.Render(p)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.NodeID, "node-id", "", "Envoy node id, unique per Envoy")
	f.StringVar(&p.Group, "proxy-group", "default", "proxy group: serves the policies with this spec.proxyGroup")
	f.StringVar(&p.XDS, "xds-address", "127.0.0.1:18000", "lbplane xDS address")
	f.BoolVar(&p.Delta, "delta", true, "incremental (delta) xDS; --delta=false for state of the world")
	f.IntVar(&p.AdminPort, "admin-port", 19000, "Envoy admin port (bound to 127.0.0.1 only)")
	f.IntVar(&p.StatsPort, "stats-port", 19001, "port serving Prometheus stats and endpoint health read-only (0: none)")
	f.StringVar(&p.StatsAddress, "stats-address", "127.0.0.1", "address of the stats port; 0.0.0.0 when lbplane or Prometheus run elsewhere")
	f.IntVar(&p.MaxConnections, "max-connections", 0, "Envoy's global limit on downstream connections (0: 80% of the open-file limit here)")
	f.Var((*heapFlag)(&p.MaxHeapBytes), "max-heap", "heap budget for Envoy's overload actions, e.g. 512Mi, 2Gi (0: no heap actions)")
	f.StringVar(&tls.Cert, "xds-tls-cert", "", "this Envoy's client certificate for xDS over mTLS (CN = node id, OU = proxy group)")
	f.StringVar(&tls.Key, "xds-tls-key", "", "its private key")
	f.StringVar(&tls.CA, "xds-tls-ca", "", "the CA that signed lbplane's certificate")
	f.StringVar(&tls.ServerName, "xds-tls-server-name", "", "name lbplane's certificate must carry (default: the xDS host)")
	cmd.MarkFlagRequired("node-id")
	return cmd
}

// heapFlag is a byte quantity in Kubernetes notation ("1Gi", "512Mi", "1073741824"); "0" turns the heap
// actions off.
type heapFlag int64

func (h *heapFlag) String() string {
	if *h == 0 {
		return "1Gi"
	}
	return resource.NewQuantity(int64(*h), resource.BinarySI).String()
}

func (h *heapFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return fmt.Errorf("want a byte quantity such as 1Gi or 512Mi, got %q", s)
	}
	if q.IsZero() {
		*h = -1 // no heap monitor
		return nil
	}
	*h = heapFlag(q.Value())
	return nil
}

func (h *heapFlag) Type() string { return "quantity" }
