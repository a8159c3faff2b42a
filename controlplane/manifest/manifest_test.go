package manifest_test

import (
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/manifest"
)

const doc = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s}
spec:
  listener: {port: 80, protocol: HTTP}
  backends: [{name: a, endpoints: [{address: 10.0.0.1, port: 80}]}]
`

func TestDecodeMultiDocument(t *testing.T) {
	in := "# leading comment\n---\n" + strings.Replace(doc, "%s", "one", 1) + "---\n# only a comment\n---\n" + strings.Replace(doc, "%s", "two", 1)
	docs, err := manifest.Decode("f.yaml", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].Policy.Name != "one" || docs[1].Policy.Name != "two" {
		t.Fatalf("got %+v", docs)
	}
	if docs[0].Source != "f.yaml#1" || docs[1].Source != "f.yaml#2" {
		t.Errorf("sources %s %s", docs[0].Source, docs[1].Source)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"unknown field": {strings.Replace(doc, "protocol: HTTP", "protocol: HTTP, proto: x", 1), `f.yaml#1: unknown field "spec.listener.proto"`},
		"wrong type":    {strings.Replace(doc, "port: 80,", "port: eighty,", 1), `f.yaml#1: spec.listener.port: must be an integer, got the string "eighty"`},
		"not yaml":      {"a: [b\n", "f.yaml#1: not valid YAML"},
		"wrong kind":    {strings.Replace(doc, "kind: LoadBalancerPolicy", "kind: Service", 1), `f.yaml#1: kind: must be "LoadBalancerPolicy", got "Service"`},
		"not utf-8":     {strings.Replace(doc, "%s", "a\xff", 1), "f.yaml#1: document is not valid UTF-8"},
		"too large":     {doc + "# " + strings.Repeat("x", manifest.MaxDocumentBytes), "f.yaml#1: document is"},
		"second of two": {strings.Replace(doc, "%s", "ok", 1) + "---\n" + strings.Replace(doc, "name: a,", "nme: a,", 1), `f.yaml#2: unknown field "spec.backends[0].nme"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Decode("f.yaml", strings.NewReader(strings.Replace(tc.in, "%s", "p", 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDecodeReportsEveryProblemAtOnce: an unknown field does not hide the document's other problems, nor a
// type error its unknown fields; each is named by its path.
func TestDecodeReportsEveryProblemAtOnce(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []string
	}{
		"unknown field and an invalid value": {
			strings.Replace(strings.Replace(doc, "protocol: HTTP", "protocol: HTTP, proto: x", 1), "port: 80,", "port: 70000,", 1),
			[]string{`unknown field "spec.listener.proto"`, "spec.listener.port"},
		},
		"type error and unknown fields": {
			strings.Replace(strings.Replace(doc, "port: 80,", "port: eighty,", 1), "name: a,", "nme: a,", 1),
			[]string{`spec.listener.port: must be an integer, got the string "eighty"`, `unknown field "spec.backends[0].nme"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Decode("f.yaml", strings.NewReader(strings.Replace(tc.in, "%s", "p", 1)))
			if err == nil {
				t.Fatal("decoded without an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
