package lbctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/pushclient"
	"github.com/lbplane/lbplane/version"
)

// globals are the flags every remote command shares.
type globals struct {
	server    string
	token     string
	tokenFile string
	caFile    string
	// waitServer bounds how long client waits for a push API that is not up yet (0: not at all).
	waitServer time.Duration

	kube   *kubeFlags      // Kubernetes mode (kube.go)
	ctx    context.Context // the run's context, which a port-forward lives as long as
	stderr io.Writer       // the command's, for notes such as --wait-server's
}

var errNotKube = errors.New("not in Kubernetes mode: pass --kubeconfig or --context")

// prepare runs before every command: the run's context, and Kubernetes mode from KUBECONFIG alone when
// nothing names a push API (no --server, LBPLANE_SERVER, token or token file), as kubectl users expect.
func (g *globals) prepare(cmd *cobra.Command) {
	g.ctx = cmd.Context()
	g.stderr = cmd.ErrOrStderr()
	if g.kube.enabled() || os.Getenv("KUBECONFIG") == "" {
		return
	}
	if cmd.Flags().Changed("server") || os.Getenv("LBPLANE_SERVER") != "" || g.token != "" || os.Getenv("LBPLANE_TOKEN") != "" || g.tokenFile != "" {
		return
	}
	g.kube.fromEnv = true
}

func (g *globals) client() (*pushclient.Client, error) {
	if g.waitServer > 0 && !g.kube.enabled() {
		return g.waitForServer(g.ctx, g.waitServer)
	}
	return g.connect()
}

// connect returns a client of the push API, or of the chart's lbplane in Kubernetes mode.
func (g *globals) connect() (*pushclient.Client, error) {
	if g.kube.enabled() {
		c, err := g.kube.connect()
		if err != nil {
			return nil, err
		}
		return c.Client(g.ctx)
	}
	token := g.token
	if token == "" {
		token = os.Getenv("LBPLANE_TOKEN")
	}
	if token == "" && g.tokenFile != "" {
		b, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return nil, &tokenFileError{err}
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, &tokenFileError{errEmptyTokenFile}
		}
	}
	if token == "" {
		return nil, errors.New("no token: pass --token or --token-file, or set LBPLANE_TOKEN or LBPLANE_TOKEN_FILE (lbplane writes the admin token to <data-dir>/token, a read-only one to <data-dir>/token-readonly: export LBPLANE_TOKEN_FILE=<data-dir>/token); for lbplane in Kubernetes, pass --kubeconfig or --context, or set KUBECONFIG, and lbctl reads the chart's token itself")
	}
	c := &pushclient.Client{BaseURL: g.server, Token: token}
	if g.caFile != "" {
		hc, err := httpsClient(g.caFile)
		if err != nil {
			return nil, err
		}
		c.HTTP = hc
	}
	return c, nil
}

// httpsClient trusts only the CA in caFile (lbplane's --api-tls-cert issuer), not the system roots: the push
// API is lbplane's, and a certificate some public CA issued for its name proves nothing about it.
func httpsClient(caFile string) (*http.Client, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// New returns the root command.
func New() *cobra.Command { return NewWith(Options{}) }

// NewWith returns the root command with o.
func NewWith(o Options) *cobra.Command {
	g := &globals{ctx: context.Background()}
	root := &cobra.Command{
		Use:           "lbctl",
		Short:         "Push, inspect and check lbplane load-balancing policies",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints lbctl's own, as "lbctl version --client" does.
		Version: version.String(),
	}
	root.SetVersionTemplate("Client Version: {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("LBPLANE_SERVER", "http://127.0.0.1:18001"), "lbplane push API URL (env LBPLANE_SERVER)")
	pf.StringVar(&g.token, "token", "", "push API bearer token (env LBPLANE_TOKEN)")
	pf.StringVar(&g.tokenFile, "token-file", os.Getenv("LBPLANE_TOKEN_FILE"), "file holding the push API token (env LBPLANE_TOKEN_FILE): <data-dir>/token to change things, <data-dir>/token-readonly to look")
	pf.StringVar(&g.caFile, "ca-file", os.Getenv("LBPLANE_CA_FILE"), "PEM CA to trust for an https:// --server (env LBPLANE_CA_FILE)")
	pf.DurationVar(&g.waitServer, "wait-server", 0, "wait up to this long for a push API that is starting (its address refusing connections, its --token-file not written yet), e.g. 30s; any other error, a refused token included, fails at once (0: no wait)")
	g.kube = newKubeFlags(pf, o)
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { g.prepare(cmd) }
	root.AddCommand(newApply(g), newPushConfig(g), newGet(g), newDelete(g), newStatus(g), newValidate(), newLint(), newDiff(g), newExplain(g), newTranslate(), newBootstrap(g), newRevoke(g), newVersion(g), newEnvoy(g))
	root.AddCommand(newDashboard(g), newTrace(g), newWhatIf(g), newEvents(g), newRollout(g), newEnvoySidecar(), newEndpoint(g))
	return root
}

// Main runs lbctl and returns the process exit code. Errors go to stderr, one line each.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainWith(Options{}, args, stdin, stdout, stderr)
}

// MainWith is Main with o. Ctrl-C ends the run's context: a --watch stops, a port-forward closes.
func MainWith(o Options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := NewWith(o)
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ec *exitCode
		if errors.As(err, &ec) {
			if ec.err != nil {
				PrintError(stderr, ec.err)
			}
			return ec.code
		}
		PrintError(stderr, err)
		return 1
	}
	return 0
}

// PrintError writes every error of err on its own line.
func PrintError(w io.Writer, err error) {
	var apiErr *pushclient.APIError
	var lines []string
	switch {
	case errors.As(err, &apiErr):
		lines = apiErr.Errors
	default:
		lines = flatten(err)
	}
	for _, l := range lines {
		fmt.Fprintln(w, "error: "+strings.ReplaceAll(l, "\n", " "))
	}
}

func flatten(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
