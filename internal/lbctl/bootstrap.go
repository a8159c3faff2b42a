package lbctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lbplane/lbplane/api/v1alpha1"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// bootstrapFlags are lbctl bootstrap's flags, which lbctl envoy shares.
type bootstrapFlags struct {
	p        envoybootstrap.Params
	tls      envoybootstrap.TLS
	outDir   string
	insecure bool
	xdsAddrs []string
	// embed puts lbplane's certificate and key in the bootstrap instead of files (lbctl bootstrap --embed).
	embed bool
	// grpc prints a proxyless gRPC client's xDS bootstrap instead of Envoy's (lbctl bootstrap --grpc).
	grpc bool
	// dir is the Envoy's directory: --out-dir, or this user's (defaultEnvoyDir). The admin socket goes
	// there unless --admin-socket says otherwise.
	dir string
}

// resolveDir sets b.dir from --out-dir or, without it, this user's directory for the node.
func (b *bootstrapFlags) resolveDir() error {
	dir := b.outDir
	if dir == "" {
		if b.p.NodeID == "" {
			return errors.New("--node-id: required")
		}
		d, err := defaultEnvoyDir(b.p.NodeID)
		if err != nil {
			return err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	b.dir = abs
	return nil
}

// issues tells whether lbplane is asked for the certificate (no credentials of the flags' own).
func (b *bootstrapFlags) issues() bool {
	return !b.insecure && b.tls.Cert == "" && b.tls.Key == "" && b.tls.CA == "" && b.tls.Dir == ""
}

func newBootstrap(g *globals) *cobra.Command {
	b := &bootstrapFlags{}
	cmd := &cobra.Command{
		Use:   "bootstrap --node-id ID",
		Short: "Print an Envoy bootstrap that gets its config from lbplane, with a client certificate for the node",
		Long: `Print an Envoy bootstrap that gets its config from lbplane.

By default it asks lbplane (the push API, admin token) for a client certificate for exactly this node id and
proxy group, valid 24 hours. The certificate, its key and lbplane's CA are written into the Envoy's
directory (--out-dir; by default ` + envoyDirDoc + `, made with mode 0700: never the working directory, which
may be a files root of lbplane serve or a git checkout) and the bootstrap points Envoy at them over SDS
files it watches: re-running the same command (from cron or a systemd timer, say every 12 hours) renews the
certificate and Envoy picks it up without a restart. Envoy's admin socket goes into the same directory
(--admin-socket to put it elsewhere). With --embed the certificate is in the bootstrap itself, and Envoy
must be restarted with a new bootstrap before it expires.`,
		Example: `  lbctl bootstrap --node-id envoy-1 > envoy-1.yaml && envoy -c envoy-1.yaml   # files in ~/.local/state/lbplane/envoy/envoy-1
  lbctl bootstrap --node-id envoy-1 > /dev/null                  # renew, Envoy keeps running
  lbctl bootstrap --node-id envoy-1 --out-dir /etc/envoy/lbplane > envoy.yaml && envoy -c envoy.yaml
  envoy --config-yaml "$(lbctl bootstrap --node-id envoy-1 --embed)"         # certificate in the bootstrap
  lbctl bootstrap --node-id edge-1 --proxy-group edge --xds-address lbplane.internal:18000 --out-dir /var/lib/envoy/edge-1
  lbctl bootstrap --node-id edge-1 --xds-address 192.0.2.11:18000,192.0.2.12:18000,192.0.2.13:18000 --xds-tls-server-name lb.internal   # 3 replicas
  lbctl bootstrap --node-id envoy-1 --xds-tls-cert e.crt --xds-tls-key e.key --xds-tls-ca ca.crt   # your own CA
  lbctl bootstrap --node-id envoy-1 --xds-insecure                             # lbplane serve --xds-insecure
  lbctl bootstrap --node-id envoy-1 --zone zone-a --out-dir /etc/envoy/lbplane   # zone-aware routing prefers zone-a
  lbctl bootstrap --node-id envoy-1 --dns-resolver 10.0.0.2 --dns-resolver 10.0.0.3:5353
  lbctl bootstrap --node-id big-1 --cluster-stats used           # 100,000 policies on one Envoy
  lbctl bootstrap --grpc --node-id orders-7 --out-dir /var/lib/orders/xds > /var/lib/orders/xds/bootstrap.json   # a proxyless gRPC client: GRPC_XDS_BOOTSTRAP=...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := b.resolveDir(); err != nil {
				return err
			}
			if b.grpc {
				return b.renderGRPC(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			certDir := b.outDir
			if b.embed && certDir != "" {
				return errors.New("--embed: the certificate goes into the bootstrap, not --out-dir; give one of them")
			}
			if certDir == "" && !b.embed && b.issues() {
				certDir = b.dir
			}
			out, err := b.render(cmd.Context(), g, cmd.ErrOrStderr(), certDir)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	b.register(cmd)
	cmd.Flags().StringVar(&b.outDir, "out-dir", "", "write the certificate, key and CA here (mode 0700), point Envoy at them (renewable without restart), and put the admin socket here (default "+envoyDirDoc+")")
	cmd.Flags().BoolVar(&b.grpc, "grpc", false, "print the xDS bootstrap JSON of a proxyless gRPC client (GRPC_XDS_BOOTSTRAP) instead of Envoy's: the node, and mTLS with the certificate written to --out-dir (gRPC's tls channel credentials and a file_watcher certificate provider, renewed by running this again)")
	cmd.Flags().BoolVar(&b.embed, "embed", false, "put the certificate and key in the bootstrap instead of files: Envoy must be restarted with a new bootstrap before the certificate expires")
	cmd.MarkFlagRequired("node-id")
	return cmd
}

// render checks the flags, asks lbplane for this node's certificate unless the flags bring their own
// credentials (written into certDir when it is set, embedded otherwise), and returns the bootstrap. Notes
// for people (where the certificate went, warnings) go to stderr.
func (b *bootstrapFlags) render(ctx context.Context, g *globals, stderr io.Writer, certDir string) ([]byte, error) {
	p, tls := b.p, b.tls
	p.XDS = strings.Join(b.xdsAddrs, ",")
	// Admin's socket goes into the Envoy's directory, which only this user can write.
	sockDir := ""
	if p.AdminSocket == "" && !p.InsecureAdminTCP {
		sock, err := adminSocketIn(b.dir)
		if err != nil {
			return nil, err
		}
		p.AdminSocket = sock
		sockDir = filepath.Dir(sock)
	}
	// Check every flag before asking lbplane for a certificate.
	if _, err := envoybootstrap.Render(p); err != nil {
		return nil, err
	}
	byo := tls.Cert != "" || tls.Key != "" || tls.CA != ""
	switch {
	case b.insecure && (byo || certDir != "" || tls.Dir != ""):
		return nil, errors.New("--xds-insecure: cannot be combined with --xds-tls-*, --xds-tls-dir or --out-dir")
	case byo && certDir != "":
		return nil, errors.New("--out-dir: cannot be combined with --xds-tls-cert/--xds-tls-key/--xds-tls-ca")
	case tls.Dir != "" && (byo || certDir != ""):
		return nil, errors.New("--xds-tls-dir: cannot be combined with --xds-tls-cert/--xds-tls-key/--xds-tls-ca or --out-dir")
	case b.insecure:
	case byo, tls.Dir != "":
		p.TLS = &tls
	default:
		c, err := g.client()
		if err != nil {
			return nil, err
		}
		group := p.Group
		if group == "" {
			group = v1alpha1.DefaultProxyGroup
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		issued, err := c.IssueCertificate(ctx, p.NodeID, group)
		if err != nil {
			return nil, fmt.Errorf("getting a certificate for node %q from lbplane: %w", p.NodeID, err)
		}
		creds := envoybootstrap.Credentials{Cert: []byte(issued.Certificate), Key: []byte(issued.PrivateKey), CA: []byte(issued.CA)}
		if certDir != "" {
			abs, err := filepath.Abs(certDir)
			if err != nil {
				return nil, fmt.Errorf("--out-dir: %w", err)
			}
			if err := privateDir("--out-dir", abs); err != nil {
				return nil, err
			}
			if err := envoybootstrap.WriteCredentials(abs, creds); err != nil {
				return nil, err
			}
			tls.Dir = abs
			fmt.Fprintf(stderr, "certificate for node %s (group %s) in %s, valid until %s; run this again before then to renew\n",
				p.NodeID, group, abs, issued.NotAfter.UTC().Format(time.RFC3339))
		} else {
			tls.Inline = &creds
			fmt.Fprintf(stderr, "certificate for node %s (group %s) embedded, valid until %s; without --embed it is renewed without restarting Envoy\n",
				p.NodeID, group, issued.NotAfter.UTC().Format(time.RFC3339))
		}
		p.TLS = &tls
	}
	out, err := envoybootstrap.Render(p)
	if err != nil {
		return nil, err
	}
	if sockDir != "" {
		// Made once lbplane has answered: a refused request leaves nothing behind.
		if err := privateDir("--admin-socket", sockDir); err != nil {
			return nil, err
		}
	}
	if p.InsecureAdminTCP {
		fmt.Fprintf(stderr, "WARNING: --insecure-admin-tcp: Envoy's admin listens on 127.0.0.1:%d, where every local process, "+
			"and any connection a proxy on this host is made to open to loopback, can stop, drain or reconfigure it\n", p.AdminPort)
	}
	return out, nil
}

// register adds the bootstrap flags but --out-dir, whose meaning lbctl envoy widens.
func (b *bootstrapFlags) register(cmd *cobra.Command) {
	p, tls := &b.p, &b.tls
	f := cmd.Flags()
	f.StringVar(&p.NodeID, "node-id", "", "Envoy node id, unique per Envoy (the certificate's CN)")
	f.StringVar(&p.Group, "proxy-group", v1alpha1.DefaultProxyGroup, "proxy group: serves the policies with this spec.proxyGroup (the certificate's OU)")
	f.StringSliceVar(&b.xdsAddrs, "xds-address", []string{"127.0.0.1:18000"}, "lbplane xDS address, host:port; several (repeated or comma-separated) for several lbplane replicas, or one DNS name that resolves to every replica: Envoy reconnects to another when its replica is gone")
	f.BoolVar(&p.Delta, "delta", true, "incremental (delta) xDS; --delta=false for state of the world")
	f.StringVar(&p.AdminSocket, "admin-socket", "", "Unix socket (mode 0600) Envoy's admin listens on (default: admin.sock in the Envoy's directory, --out-dir, which only this user can write); put it in a directory only Envoy's user can write")
	f.IntVar(&p.AdminPort, "admin-port", 0, "with --insecure-admin-tcp: the 127.0.0.1 port admin listens on instead of the socket")
	f.BoolVar(&p.InsecureAdminTCP, "insecure-admin-tcp", false, "admin on 127.0.0.1:--admin-port instead of a Unix socket: every local process, and any proxied connection to loopback, can then stop or drain Envoy (a warning is printed)")
	f.IntVar(&p.StatsPort, "stats-port", 19001, "port serving Prometheus stats and endpoint health read-only (0: none)")
	f.StringVar(&p.StatsAddress, "stats-address", "127.0.0.1", "address of the stats port; 0.0.0.0 when lbplane or Prometheus run elsewhere")
	f.IntVar(&p.MaxConnections, "max-connections", 0, "Envoy's global limit on downstream connections (0: 80% of the open-file limit here)")
	f.Var((*heapFlag)(&p.MaxHeapBytes), "max-heap", "heap budget for Envoy's overload actions, e.g. 512Mi, 2Gi (0: no heap actions)")
	f.DurationVar(&p.ScaledIdleTimeout, "scaled-idle-timeout", envoybootstrap.DefaultScaledIdleTimeout, "under connection or heap pressure (from 60 % of --max-connections or --max-heap, fully at 90 %), how long a connection that has sent nothing or a stalled request is kept, instead of the listener's timeouts (1s to 10s)")
	f.StringSliceVar(&p.DNSResolvers, "dns-resolver", nil, "DNS server (IP[:port], repeatable) Envoy resolves backend host names with, instead of /etc/resolv.conf's")
	f.StringVar(&p.ClusterStats, "cluster-stats", envoybootstrap.ClusterStatsAll, "which stats Envoy creates: all, or used (only those lbplane, its dashboard and the chart read; for Envoys with tens of thousands of clusters, whose stats cost most of the cold start)")
	f.BoolVar(&b.insecure, "xds-insecure", false, "plaintext xDS, no certificate (for lbplane serve --xds-insecure)")
	f.StringVar(&tls.Cert, "xds-tls-cert", "", "bring your own CA: this Envoy's client certificate file (CN = node id, OU = proxy group)")
	f.StringVar(&tls.Key, "xds-tls-key", "", "its private key file")
	f.StringVar(&tls.CA, "xds-tls-ca", "", "the CA file that signed lbplane's certificate")
	f.StringVar(&tls.Dir, "xds-tls-dir", "", "point Envoy at credentials files someone else keeps in this directory (xds-client.json, xds-ca.json), watched for renewals: e.g. the Secret lbplane serve --envoy-cert-secret writes, mounted there")
	f.StringVar(&tls.ServerName, "xds-tls-server-name", "", "name (or IP) lbplane's certificate must carry (default: the xDS host)")
	f.StringVar(&p.Zone, "zone", "", "zone this Envoy runs in (node.locality.zone), for backends with loadBalancing.zoneAware, e.g. the node's topology.kubernetes.io/zone")
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
