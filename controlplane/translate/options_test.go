package translate

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/objkey"
)

// withTraffic adds random traffic features to a contended policy: a PROXY protocol listener (per port, so
// it conflicts like the other edge settings), rate limits, mirrors, client certificates from files that
// change, utilization balancing.
func withTraffic(r *rand.Rand, p *v1alpha1.LoadBalancerPolicy) *v1alpha1.LoadBalancerPolicy {
	s := &p.Spec
	if r.IntN(3) == 0 {
		s.Listener.ProxyProtocol = &v1alpha1.ListenerProxyProtocol{Optional: r.IntN(2) == 0}
	}
	if len(s.Backends) == 0 {
		return p
	}
	b := &s.Backends[0]
	if r.IntN(2) == 0 {
		b.TLS = &v1alpha1.BackendTLS{InsecureSkipVerify: true, ClientCertificate: &v1alpha1.ClientCertificate{
			CertificateFile: []string{"client.crt", "missing.crt"}[r.IntN(2)], PrivateKeyFile: "client.key"}}
	}
	if r.IntN(2) == 0 {
		b.ProxyProtocol = &v1alpha1.BackendProxyProtocol{}
	}
	if r.IntN(3) == 0 {
		b.LoadBalancing.Algorithm = v1alpha1.AlgorithmBackendUtilization
	}
	b.PerEndpointStats = r.IntN(2) == 0
	if s.Listener.Protocol == v1alpha1.ProtocolTCP {
		if r.IntN(2) == 0 {
			s.Listener.RateLimit = &v1alpha1.RateLimit{Requests: int32(1 + r.IntN(100))}
		}
		return p
	}
	s.Backends = append(s.Backends, v1alpha1.Backend{Name: "shadow", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.9", Port: 80}}})
	rt := v1alpha1.Route{Backends: []v1alpha1.BackendRef{{Name: "be"}}}
	if r.IntN(2) == 0 {
		rt.RateLimit = &v1alpha1.RateLimit{Requests: int32(1 + r.IntN(100)), Interval: &metav1.Duration{Duration: time.Duration(1+r.IntN(10)) * time.Second}}
	}
	if r.IntN(2) == 0 {
		pct := int32(r.IntN(101))
		rt.Mirrors = []v1alpha1.Mirror{{Backend: "shadow", Percent: &pct}}
	}
	s.Routes = []v1alpha1.Route{rt}
	return p
}

// The incremental translator agrees with the full translation on policies with the traffic features too,
// and a changed client certificate file translates the policies that read it again.
func TestTranslatorMatchesFullTranslationWithTrafficFeatures(t *testing.T) {
	files := testFiles(t)
	files["client.crt"], files["client.key"] = files["app.crt"], files["app.key"]
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clientSecrets := 0
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 17))
		tr := NewTranslator()
		var set []*v1alpha1.LoadBalancerPolicy
		for step := range 40 {
			set = randomEdit(r, set, step, func(name string) *v1alpha1.LoadBalancerPolicy { return withTraffic(r, contended(r, name, base)) })
			if step%13 == 12 {
				files = cloneFiles(files)
				files["missing.crt"] = files["client.crt"]
				files["client.crt"] = File{Err: "no such file"}
			}
			refs := Refs{Files: files}
			got := tr.Translate(slices.Clone(set), refs)
			want := translateAll(set, refs)
			if !reflect.DeepEqual(got.Policies.Map(), want.Policies.Map()) {
				t.Fatalf("seed %d step %d: results differ:\n%s", seed, step, firstDiff(dump(got.Policies.Map()), dump(want.Policies.Map())))
			}
			if !reflect.DeepEqual(got.IR, want.IR) {
				t.Fatalf("seed %d step %d: IR differs: %s", seed, step, firstDiff(dump(got.IR), dump(want.IR)))
			}
			for _, g := range want.IR.Groups {
				for _, s := range g.Secrets {
					if len(s.Name) > 19 && s.Name[len(s.Name)-19:] == "/client-certificate" {
						clientSecrets++
					}
				}
			}
		}
	}
	if clientSecrets == 0 {
		t.Error("no sequence served a client certificate")
	}
}

// A policy that reads a client certificate is translated again when the file changes, and only then.
func TestClientCertificateFileIsAReference(t *testing.T) {
	files := testFiles(t)
	files["client.crt"], files["client.key"] = files["app.crt"], files["app.key"]
	p := withTraffic(rand.New(rand.NewPCG(1, 1)), contended(rand.New(rand.NewPCG(1, 1)), "p", time.Now()))
	p.Spec.Listener = v1alpha1.Listener{Port: 8000, Protocol: v1alpha1.ProtocolHTTP}
	p.Spec.Backends = []v1alpha1.Backend{{Name: "be", Endpoints: []v1alpha1.Endpoint{{Address: "10.0.0.1", Port: 80}},
		BackendSettings: v1alpha1.BackendSettings{TLS: &v1alpha1.BackendTLS{InsecureSkipVerify: true, ClientCertificate: &v1alpha1.ClientCertificate{CertificateFile: "client.crt", PrivateKeyFile: "client.key"}}}}}
	p.Spec.Routes = nil
	tr := NewTranslator()
	set := []*v1alpha1.LoadBalancerPolicy{p}
	first := tr.Translate(set, Refs{Files: files})
	runs := tr.Runs()
	tr.Translate(set, Refs{Files: cloneFiles(files)})
	if tr.Runs() != runs {
		t.Errorf("unchanged files translated the policy again")
	}
	changed := cloneFiles(files)
	changed["client.crt"] = File{Err: "no such file"}
	res := tr.Translate(set, Refs{Files: changed})
	if tr.Runs() != runs+1 {
		t.Errorf("a changed client certificate file was not noticed")
	}
	pr := res.Policies.Of(objkey.Of(p))
	if pr.ResolvedRefs || pr.ResolvedRefsReason != ReasonInvalidRef {
		t.Errorf("a missing client certificate: %+v", pr)
	}
	if fr := first.Policies.Of(objkey.Of(p)); !fr.ResolvedRefs {
		t.Errorf("with the files: %+v", fr)
	}
}
