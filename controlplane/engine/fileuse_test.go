package engine

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/fileroots"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// RefreshFiles runs every two seconds: with 10,000 policies of which one references a file, it reads that
// file and looks at that policy only, and a rotated CA still reaches the published config. A Kubernetes
// update that replaces the policy moves the index with it.
func TestRefreshFilesLooksOnlyAtThePoliciesThatReferenceAFile(t *testing.T) {
	const n = 10000
	e := New(xdscache.New(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.Reach = reach.Loopback
	var mu sync.Mutex
	files := map[string][]byte{}
	reads := map[string]int{}
	e.ReadFile = func(path string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		reads[path]++
		if b, ok := files[path]; ok {
			return b, nil
		}
		return nil, fileroots.ErrNotReadable
	}
	setCA := func(path string) []byte {
		t.Helper()
		ca, _, err := pki.NewCAPEM()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		files[path] = ca
		mu.Unlock()
		return ca
	}
	served := func(ca []byte) bool {
		res, _ := e.Result()
		for _, g := range res.IR.Groups {
			for _, s := range g.Secrets {
				if bytes.Equal(s.CA, ca) {
					return true
				}
			}
		}
		return false
	}
	first := setCA("/certs/ca.crt")
	policies := make([]*v1alpha1.LoadBalancerPolicy, 0, n+1)
	for i := range n {
		policies = append(policies, benchPolicy(i, 80))
	}
	policies = append(policies, servedCAPolicy("/certs/ca.crt"))
	services, secrets := map[translate.ServiceRef]translate.ServiceEndpoints{}, map[translate.SecretRef]translate.TLSSecret{}
	e.SetKubernetes(policies, services, secrets)
	if !served(first) {
		t.Fatal("the CA file is not served")
	}

	looks := e.FileLooks()
	e.RefreshFiles()
	if d := e.FileLooks() - looks; d != 0 {
		t.Errorf("a refresh with no file changed looked at %d policies' files, want 0", d)
	}
	rotated := setCA("/certs/ca.crt")
	looks = e.FileLooks()
	e.RefreshFiles()
	if d := e.FileLooks() - looks; d != 1 {
		t.Errorf("a refresh after a CA rotation looked at %d policies' files, want 1 (the one that references it)", d)
	}
	if !served(rotated) {
		t.Error("the rotated CA is not served after the refresh")
	}

	// The policy moves to another CA file through the Kubernetes entry point: the old file is no longer
	// read, the new one is.
	other := setCA("/certs/other.crt")
	e.UpdateKubernetes([]*v1alpha1.LoadBalancerPolicy{servedCAPolicy("/certs/other.crt")}, nil, services, secrets, translate.ChangedRefs{})
	if !served(other) {
		t.Fatal("the new CA file is not served")
	}
	mu.Lock()
	before := reads["/certs/ca.crt"]
	mu.Unlock()
	looks = e.FileLooks()
	e.RefreshFiles()
	mu.Lock()
	after, otherReads := reads["/certs/ca.crt"], reads["/certs/other.crt"]
	mu.Unlock()
	if after != before {
		t.Error("a refresh read the file no policy references any more")
	}
	if otherReads < 2 {
		t.Errorf("the referenced file was read %d times, want at least 2 (once for the update, once by the refresh)", otherReads)
	}
	if d := e.FileLooks() - looks; d > 1 {
		t.Errorf("a refresh looked at %d policies' files, want at most 1", d)
	}
	e.UpdateKubernetes(nil, []objkey.Key{{Namespace: "default", Name: "with-ca"}}, services, secrets, translate.ChangedRefs{})
	if got := e.referencedNow(); len(got) != 0 {
		t.Errorf("files %v still referenced after the only policy that referenced them was deleted", got)
	}
}

// servedCAPolicy is a valid policy whose backend's CA is the file ca.
func servedCAPolicy(ca string) *v1alpha1.LoadBalancerPolicy {
	p := caPolicy("with-ca", ca)
	p.APIVersion, p.Kind, p.Namespace = v1alpha1.APIVersion, v1alpha1.Kind, "default"
	return p
}
