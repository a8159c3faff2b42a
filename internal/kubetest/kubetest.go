// Package kubetest starts a real etcd and kube-apiserver on loopback for tests, with the lbplane CRD
// installed. The binaries are built once by hack/tools.sh (etcd, kube-apiserver) and cached in .cache/tools.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/internal/portreserve"
	"github.com/lbplane/lbplane/internal/tools"
)

// TB is the part of testing.TB a cluster uses: tests pass their *testing.T, and the benchmark runner, which
// is not a test, passes its own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
	Cleanup(func())
	Failed() bool
}

// AdminToken authenticates as a member of system:masters.
const AdminToken = "kubetest-admin-token"

// Cluster is a running API server.
type Cluster struct {
	Config     *rest.Config
	Client     client.Client
	Kubeconfig string
	Dir        string
	apiserver  *exec.Cmd
	etcd       *exec.Cmd
	args       []string
	apiLog     string
}

// Scheme knows the built-in types, CRDs and lbplane's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	clientgoscheme.AddToScheme(s)
	apiextensionsv1.AddToScheme(s)
	v1alpha1.AddToScheme(s)
	return s
}

func start(t TB, name, logPath, bin string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { cmd.Wait(); f.Close() }()
	return cmd
}

// Start runs etcd and kube-apiserver until the test ends and installs the CRD.
func Start(t TB) *Cluster {
	t.Helper()
	etcdBin := tools.Require(t, "etcd")
	apiBin := tools.Require(t, "kube-apiserver")
	dir := t.TempDir()
	c := &Cluster{Dir: dir, apiLog: filepath.Join(dir, "kube-apiserver.log")}

	// Ports reserved for the whole test (internal/portreserve): etcd and kube-apiserver bind them with
	// SO_REUSEPORT, so nothing else can take them first, nor while the API server is stopped and restarted.
	clientPort, peerPort := portreserve.Reserve(t), portreserve.Reserve(t)
	c.etcd = start(t, "etcd", filepath.Join(dir, "etcd.log"), etcdBin, "--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort), "--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort), "--log-level", "warn", "--socket-reuse-port")

	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	writeFile(t, filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	writeFile(t, filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	writeFile(t, filepath.Join(dir, "tokens.csv"), []byte(AdminToken+",admin,admin-uid,system:masters\n"))

	port := portreserve.Reserve(t)
	c.args = []string{
		"--permit-port-sharing",
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--enable-priority-and-fairness=false",
		// The endpoint reconciler refuses loopback addresses, and nothing here needs the kubernetes Service.
		"--endpoint-reconciler-type=none",
	}
	c.apiserver = start(t, "kube-apiserver", c.apiLog, apiBin, c.args...)
	t.Cleanup(func() {
		c.Stop()
		c.etcd.Process.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(c.apiLog)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- kube-apiserver log (last 8000 bytes)\n%s", b)
		}
	})

	c.Config = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
	cl, err := client.New(c.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c.Client = cl
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(t, c.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "%s", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %s}}]
contexts: [{name: test, context: {cluster: test, user: admin, namespace: default}}]
current-context: test
`, c.Config.Host, AdminToken)))
	c.waitReady(t, 90*time.Second)
	c.installCRDs(t)
	return c
}

func writeFile(t TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) waitReady(t TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	rc, err := rest.UnversionedRESTClientFor(&rest.Config{Host: c.Config.Host, BearerToken: AdminToken, TLSClientConfig: c.Config.TLSClientConfig,
		ContentConfig: rest.ContentConfig{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, last = rc.Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver not ready after %s: %v", timeout, last)
}

func (c *Cluster) installCRDs(t TB) {
	t.Helper()
	c.InstallCRDs(t, filepath.Join("charts", "lbplane", "crds"))
}

// InstallCRDs creates the CRDs of the YAML files in dir (relative to the repository) and waits until they
// are served: charts/lbplane/crds/gateway-api for a test of the Gateway API.
func (c *Cluster) InstallCRDs(t TB, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no CRDs under " + dir + ": run make generate")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.Client.Create(context.Background(), crd); err != nil {
			t.Fatalf("creating %s: %v", crd.Name, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Name: crd.Name}, got); err == nil {
				for _, cond := range got.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						goto next
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established", crd.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	next:
		c.waitServed(t, crd)
	}
	// A client made before the CRDs were served may have cached discovery without them; controller-runtime's
	// mapper reloads a group on a miss, and a new one starts from what is served now.
	cl, err := client.New(c.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c.Client = cl
}

// waitServed waits until discovery lists every served version of crd: Established comes first, and a client
// that maps kinds before discovery has caught up gets "no matches for kind".
func (c *Cluster) waitServed(t TB, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		for {
			list, err := dc.ServerResourcesForGroupVersion(gv)
			if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("discovery does not serve %s %s after 30s (last error: %v)", gv, crd.Spec.Names.Plural, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Stop kills the API server (etcd keeps its data); Restart brings it back on the same port.
func (c *Cluster) Stop() {
	if c.apiserver != nil && c.apiserver.Process != nil {
		c.apiserver.Process.Signal(syscall.SIGKILL)
	}
}

// Restart starts the API server again after Stop and waits until it is ready.
func (c *Cluster) Restart(t TB) {
	t.Helper()
	c.apiserver = start(t, "kube-apiserver", c.apiLog+".restarted", tools.Require(t, "kube-apiserver"), c.args...)
	c.waitReady(t, 90*time.Second)
}
