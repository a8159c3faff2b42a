package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/tools"
)

// Not Kubernetes questions: two documents with one name are an update there, and kubectl drops comments.
var notForKubernetes = map[string]string{
	"duplicate-policy": "two documents with one name in one request are an update in Kubernetes",
	"huge-document":    "the 1 MiB is a comment, which kubectl drops before sending",
	"non-utf8-comment": "the bad byte is in a comment, which kubectl drops before sending",
}

var fieldPath = regexp.MustCompile(`^((?:spec|metadata|kind|apiVersion)[A-Za-z0-9.\[\]]*)`)

// Every bad input is refused on the Kubernetes path too: by the API server (schema, CEL, strict fields), with
// the field path, or, when the schema lets it through, by lbplane, which reports Accepted=False with the
// same text lbctl validate gives.
func TestBadInputsAreRefusedOnKubernetes(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(tools.RepoRoot(), "testdata", "bad", "*.yaml"))
	cluster := kubetest.Start(t)
	// The bad inputs name endpoint addresses, which Kubernetes mode allows only where the operator says.
	startLbplane(t, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--address-backends-namespaces", "default")
	existing, _ := os.ReadFile(filepath.Join(tools.RepoRoot(), "testdata", "bad", "166-in-use-same-host.yaml"))
	if out, err := kubectl(t, cluster.Kubeconfig, strings.SplitN(string(existing), "---\n", 2)[0], "apply", "-f", "-"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // "existing" is older than everything below, to the second
	pending := map[string][]string{}    // policy name -> texts its status must carry
	refused := 0
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		id := strings.SplitN(base, "-", 2)
		if reason, skip := notForKubernetes[id[1]]; skip {
			t.Logf("%s: not applicable: %s", base, reason)
			continue
		}
		data, _ := os.ReadFile(f)
		doc := string(data)
		if i := strings.Index(doc, "---\n"); i >= 0 && strings.Contains(doc[:i], "name: existing") {
			doc = doc[i+4:]
		}
		name := "bad-" + id[0]
		doc = strings.Replace(doc, "{name: bad}", "{name: "+name+"}", 1)
		var expects []string
		for _, line := range strings.Split(string(data), "\n") {
			if e, ok := strings.CutPrefix(line, "# expect: "); ok {
				expects = append(expects, e)
			}
		}
		// create, not apply: apply keeps a copy of the object in an annotation, whose size limit would refuse
		// the large documents for a reason of its own.
		out, err := kubectl(t, cluster.Kubeconfig, doc, "create", "--validate=strict", "-f", "-")
		if err != nil {
			refused++
			// Refused before lbplane saw it: the message must name the field (or the object holding it) when the
			// expectation does, or be kubectl's own refusal of the kind, name or namespace.
			for _, e := range expects {
				if m := fieldPath.FindString(e); m != "" && !namesField(out, m) {
					t.Errorf("%s: refused without the field path %q: %.600s", base, m, out)
				}
			}
			continue
		}
		if !strings.Contains(doc, "name: "+name) {
			t.Errorf("%s: applied without a name this test can follow: %s", base, out)
			continue
		}
		pending[name] = expects
	}
	eventually(t, 60*time.Second, "lbplane reports every policy it refuses", func() error {
		for name, expects := range pending {
			out, _ := kubectl(t, cluster.Kubeconfig, "", "get", "lbp", name, "-o",
				`jsonpath={.status.conditions[?(@.type=="Accepted")].status} {.status.conditions[?(@.type=="Accepted")].message}`)
			if !strings.HasPrefix(out, "False ") {
				return fmt.Errorf("%s: Accepted %q", name, out)
			}
			for _, e := range expects {
				if !strings.Contains(out, e) {
					return fmt.Errorf("%s: status lacks %q: %.300s", name, e, out)
				}
			}
		}
		return nil
	})
	t.Logf("%d bad inputs: %d refused by the API server, %d accepted by it and reported Accepted=False by lbplane, %d not applicable",
		len(files), refused, len(pending), len(notForKubernetes))
}

// namesField reports whether a refusal names the field at path, or one of the objects that hold it, or is
// kubectl's own refusal for what path is about (the kind, the name, the namespace).
func namesField(out, path string) bool {
	switch {
	case strings.HasPrefix(path, "apiVersion") || strings.HasPrefix(path, "kind"):
		return strings.Contains(out, "no matches for kind")
	case strings.HasPrefix(path, "metadata.namespace"):
		return strings.Contains(out, "namespace")
	case strings.HasPrefix(path, "metadata.name"):
		return strings.Contains(out, "name") && (strings.Contains(out, "may not be empty") || strings.Contains(out, "metadata.name"))
	}
	for p := path; p != ""; {
		if strings.Contains(out, p+":") || strings.Contains(out, p+" ") || strings.Contains(out, p+`"`) || strings.Contains(out, p+".") {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}
