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
