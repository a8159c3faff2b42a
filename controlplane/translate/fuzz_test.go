package translate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdsbuild"
	"github.com/lbplane/lbplane/internal/tools"
)

// FuzzTranslate feeds arbitrary documents through the whole pure pipeline. Properties: nothing panics, the
// IR of accepted policies is valid, and every group builds into resources that pass the protos' own
// validation rules (what go-control-plane checks). A long run: make fuzz.
func FuzzTranslate(f *testing.F) {
	for _, dir := range []string{filepath.Join(tools.RepoRoot(), "examples"), filepath.Join(tools.RepoRoot(), "controlplane", "translate", "testdata", "in")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _ := manifest.Decode("fuzz", bytes.NewReader(data))
		policies := manifest.Policies(docs)
		res := translate.Translate(policies, translate.Refs{Files: fakeFiles(policies)})
		if err := res.IR.Validate(); err != nil {
			t.Fatalf("accepted policies gave an invalid IR: %v", err)
		}
		for name, g := range res.IR.Groups {
			if _, err := xdsbuild.Build(g); err != nil {
				t.Fatalf("group %s: accepted policies built into invalid resources: %v", name, err)
			}
		}
	})
}

// testCerts holds the example certificates, read once: fakeFiles runs for every fuzz input.
var testCerts = sync.OnceValue(func() map[string][]byte {
	out := map[string][]byte{}
	for _, name := range []string{"app.example.com.crt", "app.example.com.key", "ca.crt"} {
		b, _ := os.ReadFile(filepath.Join(tools.RepoRoot(), "examples", "certs", name))
		out[name] = b
	}
	return out
})

// fakeFiles answers every referenced file with the test certificates, so that TLS paths are exercised.
func fakeFiles(policies []*v1alpha1.LoadBalancerPolicy) translate.Files {
	read := func(name string) []byte { return testCerts()[name] }
	files := translate.Files{}
	for _, p := range policies {
		if t := p.Spec.Listener.TLS; t != nil {
			for _, c := range t.Certificates {
				files[c.CertificateFile] = translate.File{Data: read("app.example.com.crt")}
				files[c.PrivateKeyFile] = translate.File{Data: read("app.example.com.key")}
			}
		}
		for _, b := range p.Spec.Backends {
			if b.TLS != nil && b.TLS.CAFile != "" {
				files[b.TLS.CAFile] = translate.File{Data: read("ca.crt")}
			}
		}
	}
	return files
}
