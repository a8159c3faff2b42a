package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/controlplane/kubepki"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

// renderedChart is what the test needs of helm template's output: lbplane's arguments and the Envoy bootstrap.
func renderedChart(t *testing.T, set ...string) (args []string, bootstrap string) {
	t.Helper()
	out, err := helm(t, append([]string{"template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1", "--set", "apiToken=t"}, set...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Data     map[string]string     `json:"data"`
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct{ Args []string } `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) != nil {
			continue
		}
		switch {
		case obj.Kind == "ConfigMap" && obj.Data["envoy.yaml"] != "":
			bootstrap = obj.Data["envoy.yaml"]
		case obj.Kind == "Deployment" && obj.Metadata.Name == "demo-lbplane":
			args = obj.Spec.Template.Spec.Containers[0].Args
		}
	}
	if bootstrap == "" || len(args) == 0 {
		t.Fatal("the chart rendered no bootstrap or no lbplane arguments")
	}
	return args, bootstrap
}

// chartLbplaneArgs are the chart's lbplane arguments for a process on this host: the addresses, data
// directory and logging the harness sets are left out, the pod IP is loopback, and the API server is the
// test's.
func chartLbplaneArgs(t *testing.T, args []string, kubeconfig string) []string {
	t.Helper()
	var out []string
	for _, a := range args {
		switch {
		case a == "serve", strings.HasPrefix(a, "--data-dir="), strings.HasPrefix(a, "--xds-address="), strings.HasPrefix(a, "--api-address="),
			strings.HasPrefix(a, "--metrics-address="), strings.HasPrefix(a, "--log-"):
			continue
		}
		out = append(out, strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1"))
	}
	return append(out, "--kubeconfig", kubeconfig)
}

// secretAsVolume writes a Secret's keys into a new directory the way the kubelet lays out a Secret volume
// (a timestamped directory, a ..data symlink to it, and a symlink per key), and returns the directory.
func secretAsVolume(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	dir := t.TempDir()
	updateSecretVolume(t, dir, s)
	for k := range s.Data {
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// updateSecretVolume does what the kubelet does when a mounted Secret changes: the new contents go into a
// new timestamped directory, a ..data_tmp symlink to it is renamed over ..data (one atomic swap of every
// file), and the old directory is removed.
func updateSecretVolume(t *testing.T, dir string, s *corev1.Secret) {
	t.Helper()
	ts, err := os.MkdirTemp(dir, "..2026_11_23_")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(ts, k), v, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		os.RemoveAll(filepath.Join(dir, old))
	}
}

func serialOfSecret(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	b, _ := pem.Decode(s.Data[kubepki.CertKey])
	if b == nil {
		t.Fatal("no certificate in the group Secret")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.Text(16)
}

// httpsAPI points l's client at its push API, which the chart serves over HTTPS (--api-tls-auto), trusting
// only the CA in caPEM under the xds Service's name.
func httpsAPI(t *testing.T, l *Lbplane, caPEM []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate in the CA Secret")
	}
	l.APIURL = "https://" + l.ports.API
	l.Client = &pushapi.Client{BaseURL: l.APIURL, Token: token, HTTP: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "demo-lbplane-xds.lbplane.svc"}}}}
}

func getSecret(t *testing.T, c *kubetest.Cluster, name string) (*corev1.Secret, error) {
	t.Helper()
	s := &corev1.Secret{}
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: "lbplane", Name: name}, s)
	return s, err
}

// The chart with its defaults against a real API server: lbplane, started with the chart's arguments, makes
// its CA Secret and the proxy group's certificate Secret; an Envoy started with the chart's bootstrap and that
// Secret laid out as the kubelet mounts it connects over mTLS and serves a policy applied with kubectl; and a
// second replica uses the same CA.
func TestHelmChartKubernetesMTLS(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	if out, err := kubectl(t, c.Kubeconfig, "", "create", "namespace", "lbplane"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	chartArgs, bootstrap := renderedChart(t, "--set", "envoy.proxyGroup=edge", "--set", "mtls.envoyIdentity=group")
	args := chartLbplaneArgs(t, chartArgs, c.Kubeconfig)
	for _, want := range []string{"--api-tls-auto", "--ca-secret=demo-lbplane-ca", "--envoy-cert-secret=edge=demo-lbplane-envoy-tls"} {
		if !strings.Contains(strings.Join(args, " "), want) {
			t.Fatalf("the chart does not pass %s: %v", want, chartArgs)
		}
	}
	// Checked every second here instead of every minute, so that a renewal shows within the test's time.
	l := startLbplane(t, append(args, "--envoy-cert-check-interval", "1s")...)

	var caSecret, envoySecret *corev1.Secret
	eventually(t, 30*time.Second, "lbplane has made its CA and the group certificate Secrets", func() error {
		var err error
		if caSecret, err = getSecret(t, c, "demo-lbplane-ca"); err != nil {
			return err
		}
		envoySecret, err = getSecret(t, c, "demo-lbplane-envoy-tls")
		return err
	})
	if caSecret.Type != corev1.SecretTypeTLS || len(caSecret.Data[kubepki.KeyKey]) == 0 {
		t.Fatalf("CA Secret: type %s, keys %d", caSecret.Type, len(caSecret.Data))
	}
	if string(envoySecret.Data[kubepki.CAKey]) != string(caSecret.Data[kubepki.CertKey]) {
		t.Fatal("the group certificate Secret does not carry lbplane's CA")
	}
	httpsAPI(t, l, caSecret.Data[kubepki.CertKey])
	tokens, err := getSecret(t, c, "demo-lbplane-api-token")
	if err != nil {
		t.Fatalf("lbplane made no token Secret: %v", err)
	}
	tokenVersion := tokens.ResourceVersion

	// Observability in Kubernetes mode: controller-runtime's client-go and leader election metrics on lbplane's
	// metrics endpoint, and client-go's klog lines through lbplane's logger (slog's format, not klog's).
	eventually(t, 30*time.Second, "leader election and client-go metrics", func() error {
		m := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", l.metricsPort))
		if m["leader_election_master_status{name=lbplane-status-writer}"] != 1 {
			return fmt.Errorf("leader_election_master_status: %v", filterMetrics(m, "leader_election"))
		}
		if len(filterMetrics(m, "rest_client_requests_total")) == 0 {
			return errors.New("no rest_client_requests_total")
		}
		return nil
	})
	logText, _ := os.ReadFile(l.log)
	if !strings.Contains(string(logText), `msg="Attempting to acquire leader lease`) {
		t.Error("client-go's leader election line is not in lbplane's log as an slog record")
	}
	if klogLine := regexp.MustCompile(`(?m)^[IWE]\d{4} \d\d:\d\d`).Find(logText); klogLine != nil {
		t.Errorf("a klog-formatted line in lbplane's log: %q", klogLine)
	}

	// The Envoy pod: the chart's bootstrap, the Secret as mounted, the xds Service made reachable here.
	tlsDir := secretAsVolume(t, envoySecret)
	bootstrap, adminPort := chartBootstrap(t, l, bootstrap, tlsDir)
	if !strings.Contains(bootstrap, `sni: "demo-lbplane-xds.lbplane.svc"`) {
		t.Fatal("the chart's bootstrap does not verify lbplane as the xds Service's name")
	}
	port := serveThroughChartEnvoy(t, c, l, bootstrap, "envoy-chart.log")

	// Renewal: the group Secret is rewritten when it is no longer good (here: deleted), the kubelet swaps the
	// mounted files, and Envoy, watching the directory, loads the new certificate without a restart; its next
	// handshake (lbplane restarted) uses it.
	oldSerial := serialOfSecret(t, envoySecret)
	if out, err := kubectl(t, c.Kubeconfig, "", "delete", "secret", "-n", "lbplane", "demo-lbplane-envoy-tls"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var renewed *corev1.Secret
	eventually(t, 20*time.Second, "lbplane writes the group certificate Secret again", func() error {
		var err error
		renewed, err = getSecret(t, c, "demo-lbplane-envoy-tls")
		return err
	})
	newSerial := serialOfSecret(t, renewed)
	if newSerial == oldSerial {
		t.Fatal("the rewritten Secret has the old certificate")
	}
	updateSecretVolume(t, tlsDir, renewed)
	waitEnvoyCertificate(t, adminPort, newSerial)
	l.Kill()
	l.Restart(t)
	httpsAPI(t, l, caSecret.Data[kubepki.CertKey])
	waitSynced(t, l, 1)
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "k1")

	// A second replica against the same API server loads that CA: its HTTPS API verifies with the CA from the
	// Secret, and the Secret is untouched.
	l2 := startLbplane(t, args...)
	httpsAPI(t, l2, caSecret.Data[kubepki.CertKey])
	if _, err := l2.Client.Proxies(context.Background()); err != nil {
		t.Fatalf("the second replica's API, verified with the CA Secret: %v", err)
	}
	again, err := getSecret(t, c, "demo-lbplane-ca")
	if err != nil || again.ResourceVersion != caSecret.ResourceVersion {
		t.Fatalf("the CA Secret changed when the second replica started: %v", err)
	}
	var secrets corev1.SecretList
	if err := c.Client.List(context.Background(), &secrets, client.InNamespace("lbplane")); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 3 {
		t.Errorf("want the CA, the group certificate and the token Secrets only, got %d Secrets", len(secrets.Items))
	}
	// The token Secret the chart names (--token-secret), made by the first replica: the harness's admin
	// token (--token) wins, so only the read-only one is generated, and the restart and the second replica
	// found it as it was.
	tokens, err = getSecret(t, c, "demo-lbplane-api-token")
	if err != nil || len(tokens.Data["token-readonly"]) != 64 || tokens.ResourceVersion != tokenVersion {
		t.Errorf("token Secret: %v, read-only token of %d bytes, changed since the first start: %v", err, len(tokens.Data["token-readonly"]), tokens.ResourceVersion != tokenVersion)
	}
}

// waitEnvoyCertificate waits until Envoy's admin /certs lists the certificate with this serial (lower-case hex):
// the renewed certificate it loaded from the swapped Secret volume.
func waitEnvoyCertificate(t *testing.T, adminPort int, serial string) {
	t.Helper()
	eventually(t, 30*time.Second, "Envoy loads the renewed certificate from the swapped volume", func() error {
		resp, err := adminDo(adminPort, http.MethodGet, "/certs")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(strings.ToLower(string(b)), serial) {
			return fmt.Errorf("serial %s not in /certs", serial)
		}
		return nil
	})
}

// chartBootstrap is the chart's Envoy bootstrap as the Envoy pod runs it, made to run here: the TLS files
// from tlsDir, the xds Service's address replaced by lbplane's, admin's socket (and the stats listener's
// cluster in front of it) in a directory of the test's, and the stats listener on a reserved port of
// 127.0.0.1, where the reservation holds it (on 0.0.0.0 the port could be taken meanwhile as the source port
// of a connection on another address: the cluster test beside it makes many). It returns the admin's
// handle for adminDo too.
func chartBootstrap(t *testing.T, l *Lbplane, bootstrap, tlsDir string) (string, int) {
	socket, statsPort := adminSocketPath(t), reservePort(t)
	return strings.NewReplacer("/etc/envoy/tls", tlsDir,
		`address: "demo-lbplane-xds.lbplane.svc"`, `address: "127.0.0.1"`, "port_value: 18000", "port_value: "+strings.Split(l.XDSAddr, ":")[1],
		chartAdminSocket, socket, `address: "0.0.0.0"`, `address: "127.0.0.1"`,
		"port_value: 19001", fmt.Sprintf("port_value: %d", statsPort), "stats-port: 19001", fmt.Sprintf("stats-port: %d", statsPort)).Replace(bootstrap), registerAdmin(socket)
}

// chartAdminSocket is where the chart's Envoy keeps its admin socket (an emptyDir).
const chartAdminSocket = "/run/envoy/admin.sock"

// serveThroughChartEnvoy starts an Envoy with bootstrap, under a pod's name for a node id (a group
// certificate names none), applies a Service-backed policy for group edge whose backend lives in a network
// namespace the test creates (an EndpointSlice may not hold a loopback address, and test traffic stays on
// this machine), and waits until that Envoy serves it and is the one proxy lbplane lists. It returns the
// policy's port.
func serveThroughChartEnvoy(t *testing.T, c *kubetest.Cluster, l *Lbplane, bootstrap, logName string) int {
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(bootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, logName, tools.Require(t, "envoy"), "-c", cfg, "--service-node", "demo-lbplane-envoy-5d8f7-x2x9q",
		"--use-dynamic-base-id", "--concurrency", "1", "-l", "warn")
	h := newNetHost(t)
	h.backend(t, "k1", 8080)
	port := reservePort(t)
	kubeApply(t, c.Kubeconfig, kubeObjects, map[string]any{"Endpoints": []kubeEndpoint{{IP: h.IP, Ready: true}}})
	kubeApply(t, c.Kubeconfig, strings.Replace(kubePolicy, "spec:\n", "spec:\n  proxyGroup: edge\n", 1), map[string]any{"Name": "web", "Port": port})
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "k1")
	waitSynced(t, l, 1)
	ps, err := l.Client.Proxies(context.Background())
	if err != nil || len(ps) != 1 || ps[0].NodeID != "demo-lbplane-envoy-5d8f7-x2x9q" {
		t.Fatalf("proxies over the HTTPS push API: %+v %v", ps, err)
	}
	return port
}
