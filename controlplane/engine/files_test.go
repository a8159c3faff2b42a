package engine

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/fileroots"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

func caPolicy(name, ca string) *v1alpha1.LoadBalancerPolicy {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Name = name
	p.Spec.Listener = v1alpha1.Listener{Port: 10080, Protocol: v1alpha1.ProtocolHTTP}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "b", BackendSettings: v1alpha1.BackendSettings{TLS: &v1alpha1.BackendTLS{SNI: "b.internal", CAFile: ca}},
		Endpoints: []v1alpha1.Endpoint{{Address: "127.0.0.1", Port: 1}}}}
	return p
}

// A slow read (a network filesystem, a path that blocks) must not hold the engine's lock: every push and
// GET waits on it.
func TestFilesAreReadOutsideTheLock(t *testing.T) {
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	reading, release := make(chan struct{}), make(chan struct{})
	e.ReadFile = func(string) ([]byte, error) {
		close(reading)
		<-release
		return nil, fileroots.ErrNotReadable
	}
	done := make(chan []string)
	go func() { done <- e.FileErrors(caPolicy("p", "/slow/ca.crt")) }()
	<-reading
	got := make(chan struct{})
	go func() { e.Result(); e.Policies(SourceStore); close(got) }()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine's lock is held while a file is read")
	}
	close(release)
	errs := <-done
	if want := "spec.backends[0].tls.caFile: " + fileroots.ErrNotReadable.Error(); strings.Join(errs, "") != want {
		t.Errorf("errors %q, want %q", errs, want)
	}
}

func TestKubernetesModeRefusesFileReferences(t *testing.T) {
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.ReadFile = fileroots.Refuse
	errs := e.FileErrors(caPolicy("p", "/etc/ssl/certs/ca-certificates.crt"))
	if want := "spec.backends[0].tls.caFile: " + fileroots.ErrKubernetes.Error(); strings.Join(errs, "") != want {
		t.Errorf("errors %q, want %q", errs, want)
	}
}
