package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestManifestImages(t *testing.T) {
	text := `
spec:
  containers:
    - name: a
      image: registry.k8s.io/gateway-api/echo-basic:v1.5.1
    - image: "registry.k8s.io/coredns/coredns:v1.12.2"   # quoted, first key of an item
      imagePullPolicy: IfNotPresent
  initContainers:
    - name: b
      image: registry.k8s.io/gateway-api/echo-basic:v1.5.1
# image: commented.example/out:1
      image: 'registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3'
`
	got := manifestImages([]byte(text))
	want := []string{"registry.k8s.io/coredns/coredns:v1.12.2", "registry.k8s.io/gateway-api/echo-basic:v1.5.1", "registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3"}
	if !slices.Equal(got, want) {
		t.Errorf("manifestImages = %q, want %q", got, want)
	}
}

// TestCapNetBindService: the attribute the CoreDNS image's binary carries reads back, with the system's
// getcap, as what upstream's `setcap cap_net_bind_service=+ep` gives.
func TestCapNetBindService(t *testing.T) {
	getcap, err := exec.LookPath("getcap")
	if err != nil {
		t.Fatalf("getcap: %v (Debian's libcap2-bin: apt-get install libcap2-bin)", err)
	}
	f := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(f, "security.capability", []byte(capNetBindService()), 0); err != nil {
		t.Fatalf("setting security.capability (needs root, as hack/images' users and containerd are): %v", err)
	}
	out, err := exec.Command(getcap, f).CombinedOutput()
	if err != nil {
		t.Fatalf("getcap: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != f+" cap_net_bind_service=ep" {
		t.Errorf("getcap says %q, want %q", got, f+" cap_net_bind_service=ep")
	}
}

// TestConformanceSuiteTestsTheGatewayAPIWeServe: conformance/go.mod pins the suite at the Gateway API version
// lbplane's go.mod requires (whose CRDs make generate copies into the chart), so the suite checks the API the
// chart installs.
func TestConformanceSuiteTestsTheGatewayAPIWeServe(t *testing.T) {
	version := func(gomod, module string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", gomod))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
				return f[1]
			}
		}
		t.Fatalf("%s requires no %s", gomod, module)
		return ""
	}
	api := version("go.mod", "sigs.k8s.io/gateway-api")
	for _, m := range []string{"sigs.k8s.io/gateway-api", "sigs.k8s.io/gateway-api/conformance"} {
		if got := version("conformance/go.mod", m); got != api {
			t.Errorf("conformance/go.mod requires %s %s, go.mod sigs.k8s.io/gateway-api %s", m, got, api)
		}
	}
}
