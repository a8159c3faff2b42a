package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/lbplane/lbplane/controlplane/apiwire"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/envoysidecar"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

// identityPod is an Envoy "pod" of the test: the Pod object (no kubelet runs it), a token the API server
// issued for it, its sidecar's identity agent, and its Envoy's admin handle once started.
type identityPod struct {
	name  string
	pod   *corev1.Pod
	agent *envoysidecar.Identity
	admin int
}

// podToken asks the API server for a token of service account sa, for audience, bound to pod (nil: not
// bound), as the kubelet does for a projected volume, and writes it into a file of the test's.
func podToken(t *testing.T, core corev1client.CoreV1Interface, sa, audience string, pod *corev1.Pod) string {
	t.Helper()
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptrTo(int64(3600))}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tr, err := core.ServiceAccounts("lbplane").CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func ptrTo[T any](v T) *T { return &v }

// makePod creates a Pod object running as service account sa with the chart's proxy group label.
func makePod(t *testing.T, core corev1client.CoreV1Interface, name, sa string) *corev1.Pod {
	t.Helper()
	p, err := core.Pods("lbplane").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"lbplane.io/proxy-group": "default"}},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: ptrTo(false),
			Containers: []corev1.Container{{Name: "envoy", Image: "envoy"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return p
}

func certOf(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, envoybootstrap.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM certificate in the identity directory")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// authenticatedNodes are the node ids connected to l over mTLS whose certificates match them.
func authenticatedNodes(l *Lbplane) ([]string, error) {
	ps, err := l.Client.Proxies(context.Background())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if p.Authenticated {
			out = append(out, p.NodeID)
		}
	}
	slices.Sort(out)
	return out, nil
}

func waitNodes(t *testing.T, l *Lbplane, what string, want ...string) {
	t.Helper()
	eventually(t, 60*time.Second, what, func() error {
		got, err := authenticatedNodes(l)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("connected nodes %v, want %v", got, want)
		}
		return nil
	})
}

// Per-pod identity in Kubernetes, with the chart's defaults against a real API server: each Envoy pod's
// sidecar gets a certificate for its own pod (node id = the pod's name, as the API server knows the pod its
// token is bound to) and its Envoy connects with it; a token cannot get another pod's identity, nor one of
// the wrong audience or service account, nor one bound to no pod; revoking the group gives every pod a new
// certificate that its Envoy loads and reconnects with, without a restart; revoking one pod cuts that pod
// off alone, and no new certificate is issued for it.
func TestEnvoyPodIdentityKubernetes(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	if out, err := kubectl(t, c.Kubeconfig, "", "create", "namespace", "lbplane"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	chartArgs, bootstrap := renderedChart(t)
	args := chartLbplaneArgs(t, chartArgs, c.Kubeconfig)
	for _, want := range []string{"--envoy-identity-service-account=lbplane/demo-lbplane-envoy", "--envoy-identity-audience=lbplane", "--ca-configmap=demo-lbplane-ca"} {
		if !slices.Contains(args, want) {
			t.Fatalf("the chart does not pass %s: %v", want, chartArgs)
		}
	}
	if strings.Contains(strings.Join(args, " "), "--envoy-cert-secret") {
		t.Fatalf("the chart still keeps a group certificate by default: %v", chartArgs)
	}
	l := startLbplane(t, args...)

	core, err := corev1client.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var caPEM string
	eventually(t, 30*time.Second, "lbplane publishes its CA certificate in a ConfigMap", func() error {
		cm, err := core.ConfigMaps("lbplane").Get(context.Background(), "demo-lbplane-ca", metav1.GetOptions{})
		if err != nil {
			return err
		}
		caPEM = cm.Data["ca.crt"]
		if !strings.Contains(caPEM, "BEGIN CERTIFICATE") || strings.Contains(caPEM, "PRIVATE KEY") {
			return fmt.Errorf("ca.crt: %q", caPEM)
		}
		return nil
	})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	httpsAPI(t, l, []byte(caPEM))
	agent := func(tokenFile string) *envoysidecar.Identity {
		return &envoysidecar.Identity{URL: l.APIURL, TokenFile: tokenFile, CAFile: caFile, ServerName: "demo-lbplane-xds.lbplane.svc",
			Dir: t.TempDir(), Check: 500 * time.Millisecond}
	}

	for _, sa := range []string{"demo-lbplane-envoy", "other"} {
		if _, err := core.ServiceAccounts("lbplane").Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := []*identityPod{{name: "demo-lbplane-envoy-a1"}, {name: "demo-lbplane-envoy-b2"}}
	for _, p := range pods {
		p.pod = makePod(t, core, p.name, "demo-lbplane-envoy")
		p.agent = agent(podToken(t, core, "demo-lbplane-envoy", "lbplane", p.pod))
		cert, err := p.agent.Ensure(context.Background())
		if err != nil {
			t.Fatalf("pod %s: %v", p.name, err)
		}
		if cert.Subject.CommonName != p.name || !slices.Equal(cert.Subject.OrganizationalUnit, []string{"default"}) {
			t.Fatalf("pod %s got a certificate for node %q of groups %v", p.name, cert.Subject.CommonName, cert.Subject.OrganizationalUnit)
		}
	}

	// Refused: a token of the wrong audience, one of another service account, one bound to no pod, and a
	// token bound to a pod that was deleted and made again under the same name (another uid).
	other := makePod(t, core, "demo-lbplane-envoy-c3", "other")
	refusals := map[string]string{
		podToken(t, core, "demo-lbplane-envoy", "kubernetes", pods[0].pod): "audience",
		podToken(t, core, "other", "lbplane", other):                       "not an Envoy service account",
		podToken(t, core, "demo-lbplane-envoy", "lbplane", nil):            "not bound to a pod",
	}
	gone := makePod(t, core, "demo-lbplane-envoy-d4", "demo-lbplane-envoy")
	goneToken := podToken(t, core, "demo-lbplane-envoy", "lbplane", gone)
	if err := core.Pods("lbplane").Delete(context.Background(), gone.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted pod is gone", func() error {
		if _, err := core.Pods("lbplane").Get(context.Background(), gone.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still exists", gone.Name)
		}
		return nil
	})
	makePod(t, core, gone.Name, "demo-lbplane-envoy")
	refusals[goneToken] = "not valid" // the API server invalidates a token whose pod is gone
	for tokenFile, want := range refusals {
		a := agent(tokenFile)
		if _, err := a.Obtain(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token %s: want a refusal saying %q, got %v", tokenFile, want, err)
		}
		if _, err := os.Stat(filepath.Join(a.Dir, envoybootstrap.CertFile)); err == nil {
			t.Errorf("a refused request left a certificate")
		}
	}

	// The Envoys: the chart's bootstrap, each with its pod's identity directory, under its pod's name.
	for _, p := range pods {
		var b string
		b, p.admin = chartBootstrap(t, l, bootstrap, p.agent.Dir)
		cfg := filepath.Join(t.TempDir(), "envoy.yaml")
		if err := os.WriteFile(cfg, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		startProcess(t, "envoy-"+p.name+".log", tools.Require(t, "envoy"), "-c", cfg, "--service-node", p.name,
			"--use-dynamic-base-id", "--concurrency", "1", "-l", "warn")
	}
	waitNodes(t, l, "both pods' Envoys connect under their pods' names", pods[0].name, pods[1].name)

	// An Envoy that claims another pod's node id with its own certificate is refused.
	b, _ := chartBootstrap(t, l, bootstrap, pods[1].agent.Dir)
	cfg := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(cfg, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	impostor := startProcess(t, "envoy-impostor.log", tools.Require(t, "envoy"), "-c", cfg, "--service-node", "demo-lbplane-envoy-z9",
		"--use-dynamic-base-id", "--concurrency", "1", "-l", "warn")
	eventually(t, 30*time.Second, "lbplane refuses the node id that is not the certificate's", func() error {
		logText, _ := os.ReadFile(l.log)
		for _, line := range strings.Split(string(logText), "\n") {
			if strings.Contains(line, "refused a node") && strings.Contains(line, "demo-lbplane-envoy-z9") && strings.Contains(line, "does not match the client certificate") {
				return nil
			}
		}
		return fmt.Errorf("no refusal of demo-lbplane-envoy-z9 in lbplane's log")
	})
	if got, _ := authenticatedNodes(l); slices.Contains(got, "demo-lbplane-envoy-z9") {
		t.Fatalf("an Envoy claimed a node id its certificate does not carry: %v", got)
	}
	impostor.Kill()

	// Revoking the group: both sidecars see their certificates refused at their next check, get new ones,
	// and the Envoys load them from the watched directory and reconnect, without a restart.
	old := map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, p := range pods {
		old[p.name] = certOf(t, p.agent.Dir).SerialNumber.Text(16)
		go p.agent.Run(ctx)
	}
	if _, err := l.Client.Revoke(context.Background(), apiwire.RevokeRequest{Group: "default", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		var serial string
		eventually(t, 30*time.Second, "pod "+p.name+"'s sidecar gets a new certificate", func() error {
			serial = certOf(t, p.agent.Dir).SerialNumber.Text(16)
			if serial == old[p.name] {
				return fmt.Errorf("still serial %s", serial)
			}
			return nil
		})
		waitEnvoyCertificate(t, p.admin, serial)
	}
	waitNodes(t, l, "both Envoys reconnect with their new certificates", pods[0].name, pods[1].name)

	// Revoking one pod cuts it off alone; its sidecar is refused a new certificate.
	if _, err := l.Client.Revoke(context.Background(), apiwire.RevokeRequest{NodeID: pods[0].name}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, l, "only the revoked pod's Envoy is cut off", pods[1].name)
	if _, err := pods[0].agent.Obtain(context.Background()); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the revoked pod got a new certificate: %v", err)
	}
	// The other stays connected (checked over a few of its sidecar's checks).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if got, err := authenticatedNodes(l); err != nil || !slices.Equal(got, []string{pods[1].name}) {
			t.Fatalf("after revoking %s: connected %v, %v", pods[0].name, got, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
