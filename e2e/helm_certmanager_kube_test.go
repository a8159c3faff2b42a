package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

// The chart with mtls.certManager.issuerRef against a real API server. cert-manager's own CRDs (from its Go
// module, hack/tools.sh cert-manager-crds) are installed and the chart helm-installed, so the API server
// validates its Certificates against cert-manager's schema; a broken one is refused, which shows it does.
// lbplane's RBAC no longer lets it write certificate Secrets. The
// cert-manager controller does not run here (it cannot simply be built in this repository's toolchain): a
// test issuer writes the Secrets it would, from the Certificates' specs. lbplane runs with the chart's
// arguments on its Secret, an Envoy with the chart's bootstrap on the projected volume (Secret and SDS
// files), and traffic flows over mTLS; a renewed group Secret swapped into the volume is picked up by Envoy.
// lbplane, which keeps no CA in this mode, writes no Secret.
func TestHelmChartCertManager(t *testing.T) {
	t.Parallel()
	crds := tools.Path("cert-manager-crds")
	if _, err := os.Stat(filepath.Join(crds, "cert-manager.io_certificates.yaml")); err != nil {
		t.Fatalf("cert-manager's CRDs are not at %s: run hack/tools.sh cert-manager-crds (make tools)", crds)
	}
	c := kubetest.Start(t)
	if out, err := kubectl(t, c.Kubeconfig, "", "create", "namespace", "lbplane"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// create, not apply: the CRDs are too large for apply's last-applied annotation.
	if out, err := kubectl(t, c.Kubeconfig, "", "create", "-f", crds); err != nil {
		t.Fatalf("installing cert-manager's CRDs: %v\n%s", err, out)
	}
	if out, err := kubectl(t, c.Kubeconfig, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/certificates.cert-manager.io"); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	out, err := helm(t, append([]string{"template", "demo", chartDir, "-n", "lbplane", "--kube-version", "1.37.1", "--set", "apiToken=t"}, certManagerValues...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	certs := chartCertificates(t, out)
	serving, group := certs["demo-lbplane-xds-tls"], certs["demo-lbplane-envoy-tls"]
	if len(certs) != 2 || serving.raw == "" || group.raw == "" {
		t.Fatalf("want the Certificates demo-lbplane-xds-tls and demo-lbplane-envoy-tls, got %d", len(certs))
	}
	// The API server refuses what cert-manager's schema does not allow: first prove it checks at all.
	bad := strings.Replace(group.raw, "client auth", "client authentication", 1)
	if out, err := kubectl(t, c.Kubeconfig, bad, "create", "--dry-run=server", "-f", "-"); err == nil || !strings.Contains(out, "usages") {
		t.Fatalf("a Certificate with an unknown usage was not refused by cert-manager's CRD: %v %s", err, out)
	}
	// The release itself, Certificates included, goes through the API server.
	if out, err := helm(t, append([]string{"install", "demo", chartDir, "-n", "lbplane", "--kubeconfig", c.Kubeconfig, "--set", "apiToken=t"},
		certManagerValues...)...); err != nil {
		t.Fatalf("helm install with cert-manager: %v\n%s", err, out)
	}
	for _, cert := range []cmCertificate{serving, group} {
		if out, err := kubectl(t, c.Kubeconfig, "", "get", "-n", "lbplane", "certificates.cert-manager.io", cert.Metadata.Name); err != nil {
			t.Fatalf("the chart's Certificate %s: %v\n%s", cert.Metadata.Name, err, out)
		}
	}
	// lbplane writes no certificate Secret in this mode, so its service account may not; it may only create
	// and complete its push API token Secret.
	as := "system:serviceaccount:lbplane:demo-lbplane"
	for _, res := range []string{"secrets", "secrets/demo-lbplane-xds-tls", "secrets/demo-lbplane-envoy-tls", "secrets/demo-lbplane-ca"} {
		if got, _ := kubectl(t, c.Kubeconfig, "", "auth", "can-i", "--as", as, "update", res, "-n", "lbplane"); strings.TrimSpace(got) != "no" {
			t.Errorf("with cert-manager lbplane may still update %s: %s", res, got)
		}
	}
	if got, _ := kubectl(t, c.Kubeconfig, "", "auth", "can-i", "--as", as, "update", "secrets/demo-lbplane-api-token", "-n", "lbplane"); strings.TrimSpace(got) != "yes" {
		t.Errorf("lbplane may not complete its token Secret: %s", got)
	}

	// What cert-manager would do: issue each Certificate into its Secret.
	issuer := newTestIssuer(t)
	for _, cert := range []cmCertificate{serving, group} {
		if err := c.Client.Create(context.Background(), issuer.issue(t, cert)); err != nil {
			t.Fatal(err)
		}
	}
	servingSecret, err := getSecret(t, c, "demo-lbplane-xds-tls")
	if err != nil {
		t.Fatal(err)
	}
	groupSecret, err := getSecret(t, c, "demo-lbplane-envoy-tls")
	if err != nil {
		t.Fatal(err)
	}

	// lbplane with the chart's arguments, its Secret mounted where the chart mounts it.
	chartArgs, bootstrap := renderedChart(t, certManagerValues...)
	joined := strings.Join(chartArgs, " ")
	for _, unwanted := range []string{"--ca-secret", "--envoy-cert-secret", "--api-tls-auto", "--xds-insecure"} {
		if strings.Contains(joined, unwanted) {
			t.Fatalf("with cert-manager the chart still passes %s: %v", unwanted, chartArgs)
		}
	}
	lbplaneTLS := secretAsVolume(t, servingSecret)
	var args []string
	for _, a := range chartLbplaneArgs(t, chartArgs, c.Kubeconfig) {
		args = append(args, strings.ReplaceAll(a, "/etc/lbplane/tls", lbplaneTLS))
	}
	if !strings.Contains(strings.Join(args, " "), "--xds-tls-client-ca="+lbplaneTLS+"/ca.crt") {
		t.Fatalf("the chart does not verify Envoys with the issuer's ca.crt: %v", chartArgs)
	}
	l := startLbplane(t, args...)
	// The push API is served with cert-manager's certificate, verified with the issuer's CA.
	httpsAPI(t, l, servingSecret.Data["ca.crt"])

	// The Envoy pod: the chart's bootstrap, the projected volume, the xds Service made reachable here.
	var envoyConfigMap map[string]string
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if yaml.Unmarshal([]byte(doc), &obj) == nil && obj.Kind == "ConfigMap" && obj.Data["envoy.yaml"] != "" {
			envoyConfigMap = obj.Data
		}
	}
	tlsDir, renew := certManagerEnvoyVolume(t, envoyConfigMap, groupSecret)
	bootstrap, adminPort := chartBootstrap(t, l, bootstrap, tlsDir)
	port := serveThroughChartEnvoy(t, c, l, bootstrap, "envoy-certmanager.log")

	// Renewal is cert-manager's: a new certificate in the Secret, swapped into the volume by the kubelet, is
	// loaded by Envoy through the SDS files' watched directory, without a restart.
	renewed := issuer.issue(t, group)
	newSerial := serialOfSecret(t, renewed)
	renew(renewed)
	waitEnvoyCertificate(t, adminPort, newSerial)
	// Its next handshake uses it: lbplane restarted, the Envoy reconnects and is served again.
	l.Kill()
	l.Restart(t)
	httpsAPI(t, l, servingSecret.Data["ca.crt"])
	waitSynced(t, l, 1)
	waitServing(t, fmt.Sprintf("http://127.0.0.1:%d", port), "k1")

	// lbplane keeps no CA and writes no certificate in this mode: the issuer's two Secrets, the release's API
	// token and helm's release record are all there is.
	var secrets corev1.SecretList
	if err := c.Client.List(context.Background(), &secrets, client.InNamespace("lbplane")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{"demo-lbplane-api-token", "demo-lbplane-envoy-tls", "demo-lbplane-xds-tls", "sh.helm.release.v1.demo.v1"}; !slices.Equal(names, want) {
		t.Errorf("Secrets in the release namespace: %v, want %v", names, want)
	}
}
