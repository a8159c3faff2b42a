package manifest_test

import (
	"errors"
	"io"
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

// Document markers back to back are empty documents, not policies with every field missing.
func TestDecodeEmptyDocuments(t *testing.T) {
	for _, in := range []string{"---\n---\n---\n", "--- \n---\t# c\n...\n---\n", "---\n...\n"} {
		docs, err := manifest.Decode("f.yaml", strings.NewReader(in))
		if err != nil || len(docs) != 0 {
			t.Errorf("%q: %d documents, %v; want none and no error", in, len(docs), err)
		}
	}
	in := "---\n---\n" + strings.Replace(doc, "%s", "one", 1) + "---\n---\n"
	if docs, err := manifest.Decode("f.yaml", strings.NewReader(in)); err != nil || len(docs) != 1 || docs[0].Source != "f.yaml#1" {
		t.Errorf("one policy among empty documents: %d documents, %v", len(docs), err)
	}
}

// A stream of more than MaxDocuments documents, empty ones included, is refused with one error, and the
// decoder stops reading at the limit: the rest of the stream is never read.
func TestDecodeStopsAtTheDocumentLimit(t *testing.T) {
	within := strings.Repeat("---\n", manifest.MaxDocuments)
	if docs, err := manifest.Decode("f.yaml", strings.NewReader(within)); err != nil || len(docs) != 0 {
		t.Errorf("%d empty documents: %d documents, %v; want none and no error", manifest.MaxDocuments, len(docs), err)
	}
	for name, unit := range map[string]string{"empty": "---\n", "empty objects": "{}\n---\n"} {
		r := &countingReader{r: strings.NewReader(strings.Repeat(unit, 2*manifest.MaxDocuments+100))}
		docs, err := manifest.Decode("f.yaml", r)
		if !errors.Is(err, manifest.ErrTooManyDocuments) || len(docs) != 0 {
			t.Errorf("%s over the limit: %d documents, %v; want none and ErrTooManyDocuments", name, len(docs), err)
			continue
		}
		if got := strings.Count(err.Error(), "\n") + 1; got != 1 || !strings.HasPrefix(err.Error(), "f.yaml: more than 10000 documents") {
			t.Errorf("%s over the limit: %d error lines, %q; want one naming the source", name, got, err)
		}
		// Read at the limit, plus the reader's buffer: not the rest of the stream.
		if limit := (manifest.MaxDocuments+1)*len(unit) + 64<<10 + 4096; r.n > limit {
			t.Errorf("%s over the limit: read %d bytes of %d, want at most %d", name, r.n, 2*manifest.MaxDocuments*len(unit), limit)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// DecodeBytes refuses data of more than MaxDocuments document markers before decoding any document; within
// the limit it decodes as Decode does.
func TestDecodeBytesCountsMarkersFirst(t *testing.T) {
	bomb := []byte(strings.Repeat("{}\n---\n", 1_100_000))
	allocs := testing.AllocsPerRun(1, func() {
		if _, err := manifest.DecodeBytes("f.yaml", bomb); !errors.Is(err, manifest.ErrTooManyDocuments) {
			t.Errorf("1,100,000 documents: %v, want ErrTooManyDocuments", err)
		}
	})
	if allocs > 10 {
		t.Errorf("refusing the bomb took %.0f allocations: documents were decoded", allocs)
	}
	in := "---\n" + strings.Replace(doc, "%s", "one", 1) + "---\n" + strings.Replace(doc, "%s", "two", 1)
	docs, err := manifest.DecodeBytes("f.yaml", []byte(in))
	if err != nil || len(docs) != 2 || docs[1].Source != "f.yaml#2" {
		t.Errorf("two policies: %d documents, %v", len(docs), err)
	}
}

// TestReadPathWithOtherKinds: the documents another reader takes go to it, in order, with their source; the
// others are policies as ever, and what it finds wrong is an error of that document.
func TestReadPathWithOtherKinds(t *testing.T) {
	in := strings.Replace(doc, "%s", "one", 1) + "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: web}\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: bad}\n---\n" + strings.Replace(doc, "%s", "two", 1) +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"
	var took []string
	other := func(source, apiVersion, kind string, b []byte) (bool, error) {
		if kind == "ConfigMap" {
			return false, nil
		}
		took = append(took, source+" "+apiVersion+" "+kind)
		if kind == "Service" {
			return true, errors.New("spec: required")
		}
		return true, nil
	}
	docs, err := manifest.ReadPathWith("-", strings.NewReader(in), other)
	if len(docs) != 2 || docs[0].Source != "<stdin>#1" || docs[1].Source != "<stdin>#4" {
		t.Fatalf("policies %+v, %v", docs, err)
	}
	if strings.Join(took, ", ") != "<stdin>#2 gateway.networking.k8s.io/v1 Gateway, <stdin>#3 v1 Service" {
		t.Errorf("the other reader took %q", took)
	}
	if err == nil || !strings.Contains(err.Error(), "<stdin>#3: spec: required") || !strings.Contains(err.Error(), `<stdin>#5: kind: must be "LoadBalancerPolicy", got "ConfigMap"`) {
		t.Errorf("errors: %v", err)
	}
}
