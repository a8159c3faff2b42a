package e2e

// Attacks on what lbplane reads and on its push API (issue 14, items 4 and 5): policies naming files they
// should not, a config directory holding things it should not, and clients without the right token or in no
// hurry. Each attack runs against the real lbplane binary (and a real Envoy where what reaches Envoy is the
// point), and each must be refused quickly, say the same thing whatever the file is, leak nothing, and leave
// lbplane's memory and its other users alone.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// rssKiB reads a process's resident set size from /proc.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// cpuTicks is a process's user+system time in clock ticks, from /proc/<pid>/stat.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name may hold spaces; the fields after its closing parenthesis do not.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

const attackHTTPS = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener:
    address: 127.0.0.1
    port: {{.Port}}
    protocol: HTTPS
    hostnames: [app.example.com]
    tls:
      certificates:
        - {certificateFile: "{{.Cert}}", privateKeyFile: "{{.Key}}"}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}]
`

const attackCA = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: {{.Name}}}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, tls: {sni: backend.internal, caFile: "{{.CA}}"}, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}]
`

const attackPlain = `
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: plain}
spec:
  listener: {address: 127.0.0.1, port: {{.Port}}, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: {{.B}}}]}]
`

const notReadable = "not a readable regular file under the files roots (lbplane serve --files-root)"

func TestAttackPolicyFilesOutsideTheRoots(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{root, outside} {
		copyFile(t, certs("app.example.com.crt"), filepath.Join(d, "app.crt"))
		copyFile(t, certs("app.example.com.key"), filepath.Join(d, "app.key"))
	}
	if err := syscall.Mkfifo(filepath.Join(root, "pipe.crt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "app.crt"), filepath.Join(root, "out.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "app.key"), filepath.Join(root, "out.key")); err != nil {
		t.Fatal(err)
	}
	// A combined key + certificate file, as some tools write them, named as a CA.
	combined := filepath.Join(root, "combined.pem")
	var both []byte
	for _, f := range []string{"app.example.com.key", "app.example.com.crt", "ca.crt"} {
		b, _ := os.ReadFile(certs(f))
		both = append(both, b...)
	}
	if err := os.WriteFile(combined, both, 0o600); err != nil {
		t.Fatal(err)
	}

	bs := startBackends(t, "a1", "a2")
	l := startLbplane(t, "--files-root", root)
	pid := l.cmd.Process.Pid
	plainPort, httpsPort, caPort := reservePort(t), reservePort(t), reservePort(t)
	e := startEnvoy(t, l, "envoy-files", true)
	push(t, l, policy(t, attackPlain, map[string]any{"Port": plainPort, "B": bs[0].Port}))
	// A good HTTPS policy by a relative name and by an absolute one, to show the roots do serve.
	push(t, l, policy(t, attackHTTPS, map[string]any{"Name": "https", "Port": httpsPort, "Cert": "app.crt", "Key": filepath.Join(root, "app.key"), "B": bs[0].Port}))
	plainURL := fmt.Sprintf("http://127.0.0.1:%d", plainPort)
	waitServing(t, plainURL, "a1")
	rssBefore := rssKiB(t, pid)

	type attack struct{ name, cert, key, field string }
	cert0 := "spec.listener.tls.certificates[0]"
	attacks := []attack{
		{"outside, exists", filepath.Join(outside, "app.crt"), filepath.Join(outside, "app.key"), cert0 + ".certificateFile"},
		{"outside, missing", filepath.Join(outside, "nope.crt"), filepath.Join(outside, "nope.key"), cert0 + ".certificateFile"},
		{"inside, missing", filepath.Join(root, "nope.crt"), "app.key", cert0 + ".certificateFile"},
		{"dot-dot", "../outside/app.crt", "app.key", cert0 + ".certificateFile"},
		{"fifo", "pipe.crt", "app.key", cert0 + ".certificateFile"},
		{"/dev/zero", "/dev/zero", "app.key", cert0 + ".certificateFile"},
		{"symlink out", "out.crt", "app.key", cert0 + ".certificateFile"},
		{"key by a symlink out", "app.crt", "out.key", cert0 + ".privateKeyFile"},
		{"key outside", "app.crt", filepath.Join(outside, "app.key"), cert0 + ".privateKeyFile"},
		{"/etc/shadow", "/etc/shadow", "app.key", cert0 + ".certificateFile"},
	}

	// Meanwhile, someone else keeps pushing: each push must go through promptly (a FIFO once hung the
	// engine and every later push). Bounded: 20 pushes, each within 10s.
	var wg sync.WaitGroup
	pushErrs := make(chan error, 20)
	stopPushing := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			select {
			case <-stopPushing:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			_, err := l.Client.Apply(ctx, policy(t, attackPlain, map[string]any{"Port": plainPort, "B": bs[i%2].Port}), false)
			cancel()
			if err != nil {
				pushErrs <- fmt.Errorf("push %d after %s: %w", i, time.Since(start), err)
				return
			}
		}
	}()

	for round := 0; round < 3; round++ {
		for _, a := range attacks {
			for _, dry := range []bool{true, false} {
				doc := policy(t, attackHTTPS, map[string]any{"Name": "attack", "Port": httpsPort + 1, "Cert": a.cert, "Key": a.key, "B": bs[0].Port})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				_, err := l.Client.Apply(ctx, doc, dry)
				took := time.Since(start)
				cancel()
				var apiErr *pushapi.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("%s (dry run %v): %v, want a refusal", a.name, dry, err)
				}
				want := "default/attack: " + a.field + ": " + notReadable
				if apiErr.Status != http.StatusConflict || len(apiErr.Errors) != 1 || apiErr.Errors[0] != want {
					t.Errorf("%s (dry run %v): %d %q\nwant 409 %q", a.name, dry, apiErr.Status, apiErr.Errors, want)
				}
				if took > 2*time.Second {
					t.Errorf("%s (dry run %v): refused after %s; want it quick", a.name, dry, took)
				}
			}
		}
		// The same through a CA file.
		for _, ca := range []string{"/dev/zero", "pipe.crt", "out.crt", filepath.Join(outside, "app.crt")} {
			_, err := l.Client.Apply(context.Background(), policy(t, attackCA, map[string]any{"Name": "attack-ca", "Port": caPort + 1, "CA": ca, "B": bs[0].Port}), true)
			var apiErr *pushapi.APIError
			want := "default/attack-ca: spec.backends[0].tls.caFile: " + notReadable
			if !errors.As(err, &apiErr) || len(apiErr.Errors) != 1 || apiErr.Errors[0] != want {
				t.Errorf("caFile %s: %v; want %q", ca, err, want)
			}
		}
	}
	close(stopPushing)
	wg.Wait()
	close(pushErrs)
	for err := range pushErrs {
		t.Errorf("a push next to the attacks failed: %v", err)
	}
	rssAfter := rssKiB(t, pid)
	if grown := rssAfter - rssBefore; grown > 64<<10 {
		t.Errorf("lbplane's RSS grew by %d KiB during the attacks (%d → %d KiB)", grown, rssBefore, rssAfter)
	}
	t.Logf("lbplane RSS %d → %d KiB over %d refused pushes", rssBefore, rssAfter, 3*(2*len(attacks)+4))

	// The combined certificate + key named as a CA is refused, with the field and why, and nothing of it
	// reaches Envoy.
	_, err := l.Client.Apply(context.Background(), policy(t, attackCA, map[string]any{"Name": "upstream", "Port": caPort, "CA": "combined.pem", "B": bs[0].Port}), false)
	if err == nil || !strings.Contains(err.Error(), "caFile: holds a private key") {
		t.Fatalf("a CA file holding a private key: %v, want it refused naming caFile", err)
	}
	if strings.Contains(e.ConfigDump(t), "PRIVATE KEY") {
		t.Fatalf("a private key reached Envoy in clear")
	}
	// The HTTPS policy named by relative and absolute paths under the root serves.
	waitServing(t, plainURL, "a1", "a2")
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{RootCAs: testCA(t), ServerName: "app.example.com"})
	if err != nil {
		t.Fatalf("the good HTTPS policy: %v", err)
	}
	conn.Close()
}

func TestAttackConfigDirSymlinkOutAndHugeFile(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "policies")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What a symlink out would expose: YAML-shaped lines, as /etc/shadow is.
	secret := filepath.Join(base, "shadow")
	if err := os.WriteFile(secret, []byte("root: SECRETHASH-e2e\ndaemon: OTHERSECRET-e2e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "shadow.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shadow", filepath.Join(dir, "shadow-rel.yaml")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "huge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(500 << 20); err != nil { // sparse: 500 MiB of zeros that take no disk
		t.Fatal(err)
	}
	f.Close()
	bs := startBackends(t, "c1", "c2")
	port := reservePort(t)
	good := filepath.Join(dir, "good.yaml")
	write := func(b int) {
		t.Helper()
		tmp := good + ".tmp"
		if err := os.WriteFile(tmp, policy(t, dirPolicy, map[string]any{"Port": port, "Backend": b}), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, good); err != nil {
			t.Fatal(err)
		}
	}
	write(bs[0].Port)
	l := startLbplane(t, "--config-dir", dir)
	pid := l.cmd.Process.Pid
	startEnvoy(t, l, "envoy-configdir", true)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitServing(t, url, "c1")
	rssBefore, cpuBefore, start := rssKiB(t, pid), cpuTicks(t, pid), time.Now()

	// A change makes the watcher look at the directory again, huge file and links included; it must be
	// picked up as usual.
	write(bs[1].Port)
	waitServing(t, url, "c2")
	// Let a few more polls pass (the watcher polls every second) and measure what they cost.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := l.Client.List(context.Background()); err != nil {
			t.Fatalf("the API during the config-dir attack: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rssAfter, cpuAfter, elapsed := rssKiB(t, pid), cpuTicks(t, pid), time.Since(start)
	if grown := rssAfter - rssBefore; grown > 32<<10 {
		t.Errorf("lbplane's RSS grew by %d KiB with a 500 MiB file in the config dir (%d → %d KiB)", grown, rssBefore, rssAfter)
	}
	// 100 ticks a second: reading and hashing 500 MiB a second took 65 % of a core.
	if share := float64(cpuAfter-cpuBefore) / 100 / elapsed.Seconds(); share > 0.25 {
		t.Errorf("lbplane used %.0f %% of a core while idle with the config-dir attack in place", share*100)
	}
	t.Logf("RSS %d → %d KiB, CPU %d ticks in %s", rssBefore, rssAfter, cpuAfter-cpuBefore, elapsed.Round(time.Millisecond))

	log, err := os.ReadFile(l.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"SECRETHASH", "OTHERSECRET", "daemon"} {
		if strings.Contains(string(log), leak) {
			t.Errorf("lbplane's log holds %q from a file outside the config dir", leak)
		}
	}
	for _, want := range []string{"shadow.yaml: not a regular file inside the config directory", "shadow-rel.yaml: not a regular file inside the config directory",
		"huge.yaml: 524288000 bytes, larger than the 4194304-byte limit"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("lbplane's log does not say %q", want)
		}
	}
	ps, err := l.Client.List(context.Background())
	if err != nil || len(ps) != 1 {
		t.Errorf("policies: %d, %v; want the good one only", len(ps), err)
	}
}

func TestAttackPushAPIRefusesWithoutTheRightToken(t *testing.T) {
	t.Parallel()
	l := startLbplane(t)
	ro, err := os.ReadFile(filepath.Join(l.DataDir, "token-readonly"))
	if err != nil {
		t.Fatal(err)
	}
	readOnly := strings.TrimSpace(string(ro))
	if info, _ := os.Stat(filepath.Join(l.DataDir, "token-readonly")); info.Mode().Perm() != 0o600 {
		t.Errorf("token-readonly is %v, want 0600", info.Mode().Perm())
	}
	bs := startBackends(t, "t1")
	doc := policy(t, attackPlain, map[string]any{"Port": reservePort(t), "B": bs[0].Port})
	call := func(method, path, tok string, body io.Reader) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, l.APIURL+path, body)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		name, method, path, tok string
		body                    []byte
		want                    int
		says                    string
	}{
		{"no token, push", "POST", "/v1/policies", "", doc, 401, "missing or wrong bearer token"},
		{"no token, read", "GET", "/v1/policies", "", nil, 401, "missing or wrong bearer token"},
		{"wrong token", "POST", "/v1/policies", token + "x", doc, 401, "missing or wrong bearer token"},
		{"read-only token, push", "POST", "/v1/policies", readOnly, doc, 403, "read-only"},
		{"read-only token, delete", "DELETE", "/v1/policies/default/plain", readOnly, nil, 403, "read-only"},
		{"read-only token, dry run", "POST", "/v1/policies?dryRun=true", readOnly, doc, 403, "read-only"},
		{"read-only token, read", "GET", "/v1/policies", readOnly, nil, 200, "LoadBalancerPolicyList"},
		{"read-only token, proxies", "GET", "/v1/proxies", readOnly, nil, 200, ""},
		{"read-only token, diff", "POST", "/v1/diff", readOnly, doc, 200, "changes"},
		{"oversized body", "POST", "/v1/policies", token, make([]byte, pushapi.MaxBodyBytes+1), 413, "larger than"},
	} {
		var body io.Reader
		if c.body != nil {
			body = strings.NewReader(string(c.body))
		}
		code, text := call(c.method, c.path, c.tok, body)
		if code != c.want || !strings.Contains(text, c.says) {
			t.Errorf("%s: %d %s; want %d with %q", c.name, code, text, c.want, c.says)
		}
	}
	if ps, err := l.Client.List(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("after the refused writes: %d policies, %v", len(ps), err)
	}
	// lbctl with the read-only token reads, and its push is refused with a clear message.
	roFile := filepath.Join(l.DataDir, "token-readonly")
	cmd := exec.Command(filepath.Join(binDir, "lbctl"), "--server", l.APIURL, "--token-file", roFile, "push-config", "-f", "-")
	cmd.Stdin = strings.NewReader(string(doc))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "this token is read-only") {
		t.Errorf("lbctl push with the read-only token: %v %s", err, out)
	}

	// Slowloris: a client that sends its request head one byte a second is cut at the header deadline,
	// and the API keeps answering everyone else meanwhile.
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.APIURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/policies HTTP/1.1\r\nHost: lbplane\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var cut time.Duration
	buf := make([]byte, 512)
	for i := 0; i < 40 && cut == 0; i++ { // at most 40 bytes, 40 s
		if _, err := conn.Write([]byte{'X'}); err != nil {
			cut = time.Since(start)
			break
		}
		// Waiting on a read is the pacing: it returns early if the server closes the connection.
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(buf); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				cut = time.Since(start)
			}
		} else {
			cut = time.Since(start) // the server answered (408) and will close
		}
		if i == 3 {
			if _, err := l.Client.List(context.Background()); err != nil {
				t.Errorf("the API during a slowloris: %v", err)
			}
		}
	}
	if cut == 0 || cut > 15*time.Second {
		t.Errorf("a one-byte-a-second client was not cut at the header deadline (10s): cut after %v", cut)
	}
	t.Logf("slowloris cut after %s", cut.Round(100*time.Millisecond))
}

// writeAPICert writes a CA and a serving certificate for 127.0.0.1 signed by it, with the given serial.
func writeAPICert(t *testing.T, dir string, serial int64) (caPath, certPath, keyPath string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "api test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "lbplane api"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	caPath, certPath, keyPath = filepath.Join(dir, fmt.Sprintf("ca-%d.crt", serial)), filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	for p, blk := range map[string]*pem.Block{caPath: {Type: "CERTIFICATE", Bytes: caDER}, certPath + ".new": {Type: "CERTIFICATE", Bytes: der}, keyPath + ".new": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(p, pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Key first, then certificate, each by rename, as a rotation would.
	if err := os.Rename(keyPath+".new", keyPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(certPath+".new", certPath); err != nil {
		t.Fatal(err)
	}
	return caPath, certPath, keyPath
}

func TestAttackPushAPIOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca1, cert, key := writeAPICert(t, dir, 100)
	l := startLbplane(t, "--api-tls-cert", cert, "--api-tls-key", key)
	httpsURL := strings.Replace(l.APIURL, "http://", "https://", 1)
	out, errOut, err := lbctl(t, l, "", "--server", httpsURL, "--ca-file", ca1, "get")
	if err != nil {
		t.Fatalf("lbctl over HTTPS with --ca-file: %v %s %s", err, out, errOut)
	}
	// Without the CA, the client refuses the server; a plaintext client never gets an answer with data.
	if _, errOut, err := lbctl(t, l, "", "--server", httpsURL, "get"); err == nil || !strings.Contains(errOut, "certificate") {
		t.Errorf("lbctl without --ca-file: %v %s", err, errOut)
	}
	req, _ := http.NewRequest("GET", l.APIURL+"/v1/policies", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plaintext HTTP to the TLS API answered 200: %s", b)
		}
	}
	// Rotation: a new certificate (another CA) is served without a restart.
	ca2, _, _ := writeAPICert(t, dir, 200)
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(ca2)
	pool.AppendCertsFromPEM(b)
	eventually(t, 30*time.Second, "the rotated API certificate is served", func() error {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(l.APIURL, "http://"), &tls.Config{RootCAs: pool})
		if err != nil {
			return err
		}
		conn.Close()
		return nil
	})
	if _, errOut, err := lbctl(t, l, "", "--server", httpsURL, "--ca-file", ca2, "get"); err != nil {
		t.Errorf("lbctl after the rotation: %v %s", err, errOut)
	}
}

func TestAttackPushAPIPlaintextOffLoopbackRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "lbplane"), "serve", "--data-dir", dir, "--xds-address", "127.0.0.1:0",
		"--api-address", "0.0.0.0:0", "--metrics-address", "", "--token", token)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "--api-insecure-listen-any") {
		t.Fatalf("plaintext push API on 0.0.0.0: %v\n%s", err, lastLines(out, 20))
	}
	// With the flag it starts, and says loudly what it does.
	p := startProcess(t, "lbplane-any.log", filepath.Join(binDir, "lbplane"), "serve", "--data-dir", dir, "--xds-address", "127.0.0.1:0",
		"--api-address", "0.0.0.0:0", "--metrics-address", "", "--token", token, "--api-insecure-listen-any")
	var ports serve.Ports
	eventually(t, 30*time.Second, "lbplane binds its API on every address", func() error {
		var err error
		ports, err = serve.ReadPorts(dir)
		return err
	})
	if host, _, _ := net.SplitHostPort(ports.API); host != "::" && host != "0.0.0.0" {
		t.Fatalf("the push API is bound to %s, want every address", ports.API)
	}
	eventually(t, 30*time.Second, "lbplane serves its API on every address", func() error {
		_, port, _ := net.SplitHostPort(ports.API)
		resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	eventually(t, 10*time.Second, "the warning is logged", func() error {
		f, err := os.Open(p.log)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "INSECURE: the push API serves plaintext HTTP on a non-loopback address") {
				return nil
			}
		}
		return errors.New("no warning yet")
	})
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// In Kubernetes mode the files of lbplane's pod are not the user's to name: a policy that names one is not
// served, and its status says why, with the field.
func TestAttackKubernetesPolicyNamingAFile(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	startLbplane(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--address-backends-namespaces", "default")
	port := reservePort(t)
	kubeApply(t, cluster.Kubeconfig, attackCA, map[string]any{"Name": "names-a-file", "Port": port, "CA": "/etc/ssl/certs/ca-certificates.crt", "B": 8080})
	want := "spec.backends[0].tls.caFile: file references are not allowed in Kubernetes mode"
	eventually(t, 60*time.Second, "the policy's ResolvedRefs says file references are refused", func() error {
		out, err := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", "names-a-file", "-o",
			`jsonpath={.status.conditions[?(@.type=="ResolvedRefs")].status}: {.status.conditions[?(@.type=="ResolvedRefs")].message}`)
		if err != nil || !strings.HasPrefix(out, "False:") || !strings.Contains(out, want) {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	})
}
