package configdir

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/translate"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

const good = `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: good}
spec:
  listener: {port: 10080, protocol: HTTP}
  backends: [{name: app, endpoints: [{address: 127.0.0.1, port: 8080}]}]
`

// named is the good policy under another name.
func named(name string) string { return strings.Replace(good, "name: good", "name: "+name, 1) }

// writer writes a file of dir.
func writer(t *testing.T, dir string) func(name, content string) {
	return func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newWatcher(t *testing.T, dir string) (*Watcher, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	l := slog.New(slog.NewTextHandler(&log, nil))
	e := engine.New(xdscache.New(), l)
	e.Reach = reach.Loopback // the policies name backends on loopback
	return &Watcher{Dir: dir, Engine: e, Log: l}, &log
}

func TestConfigDirRefusesWhatIsNotItsOwn(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "policies")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(base, "shadow")
	// Looks like YAML: every line would become an "unknown field" if decoded and reported as before.
	if err := os.WriteFile(secret, []byte("root:SECRETHASH:19000:0:99999:7:::\nalice:OTHERSECRET:19000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := writer(t, dir)
	write("good.yaml", good)
	// Inside the directory and broken: the same secret-looking content must not be echoed either.
	write("junk.yaml", "root: SECRETHASH\nalice: OTHERSECRET\n")
	write("typo.yaml", strings.Replace(strings.Replace(good, "name: good", "name: typo", 1), "protocol: HTTP", "protocl: HTTP", 1))
	write("badvalue.yaml", strings.Replace(strings.Replace(good, "name: good", "name: bv", 1), "port: 10080", "port: SECRETVALUE", 1))
	write("anchor.yaml", "a: *SECRETANCHOR\n")
	if err := os.Symlink(secret, filepath.Join(dir, "link-out.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shadow", filepath.Join(dir, "link-rel.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("good.yaml", filepath.Join(dir, "link-in.yaml.bak")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(500 << 20); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	f.Close()

	w, log := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	out := log.String() + strings.Join(w.Errors(), "\n")
	for _, leak := range []string{"SECRETHASH", "OTHERSECRET", "root", "alice", "SECRETVALUE", "SECRETANCHOR"} {
		if strings.Contains(out, leak) {
			t.Errorf("the log echoes %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{
		"link-out.yaml: " + notInside,
		"link-rel.yaml: " + notInside,
		"big.yaml: 524288000 bytes, larger than the 4194304-byte limit",
		"junk.yaml#1: not a LoadBalancerPolicy",
		`typo.yaml#1: unknown field "spec.listener.protocl"`,
		"badvalue.yaml#1: spec.listener.port: must be an integer, got a string",
		"anchor.yaml#1: not valid YAML",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the errors do not say %q:\n%s", want, out)
		}
	}
	if got := len(w.Engine.Policies(engine.SourceConfigDir)); got != 1 {
		t.Errorf("%d policies loaded, want the good one", got)
	}

	// Nothing changed: nothing is read or logged again.
	log.Reset()
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Errorf("an unchanged directory was loaded again:\n%s", log.String())
	}
}

func TestConfigDirReplacedByRenameIsFollowed(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "policies")
	for _, d := range []string{dir, dir + ".new"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	renamed := named("renamed")
	if err := os.WriteFile(filepath.Join(dir+".new", "good.yaml"), []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".new", dir); err != nil {
		t.Fatal(err)
	}
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	ps := w.Engine.Policies(engine.SourceConfigDir)
	if len(ps) != 1 || ps[0].Name != "renamed" {
		t.Errorf("after the directory was replaced: %d policies (%v)", len(ps), ps)
	}
}

// A reload decodes only the files that changed; the others keep their decoded policies and their errors.
func TestConfigDirReloadDecodesOnlyChangedFiles(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("a.yaml", named("a"))
	write("b.yaml", named("b"))
	write("bad.yaml", strings.Replace(named("bad"), "port: 10080", "port: notanumber", 1))
	w, _ := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	if len(w.files[path("a.yaml")]) != 1 || len(w.files[path("b.yaml")]) != 1 {
		t.Fatalf("first load: files %v", w.files)
	}
	firstErrs := w.Errors()
	if len(firstErrs) != 1 || !strings.Contains(firstErrs[0], "bad.yaml") {
		t.Fatalf("first load: errors %q, want one for bad.yaml", firstErrs)
	}
	a, b := w.files[path("a.yaml")][0], w.files[path("b.yaml")][0]

	write("a.yaml", strings.Replace(named("a"), "port: 10080", "port: 9090", 1))
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := w.files[path("b.yaml")][0]; got != b {
		t.Error("b.yaml did not change but was decoded again")
	}
	if got := w.files[path("a.yaml")][0]; got == a || got.Spec.Listener.Port != 9090 {
		t.Errorf("a.yaml changed to port 9090; loaded %+v", got.Spec.Listener)
	}
	if got := w.Errors(); !slices.Equal(got, firstErrs) {
		t.Errorf("bad.yaml did not change; errors %q, want %q", got, firstErrs)
	}

	write("bad.yaml", named("bad"))
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := w.Errors(); len(got) != 0 || len(w.files[path("bad.yaml")]) != 1 {
		t.Errorf("bad.yaml fixed: errors %q, policies %d", got, len(w.files[path("bad.yaml")]))
	}
}

// A reload checks (defaults and validates) only the policies of the files that changed: the others are the
// same pointers as before, and their check of the last load stands. The test marks b's check to see that it
// is read, not redone, and that a changed b.yaml is checked afresh.
func TestConfigDirReloadChecksOnlyChangedFiles(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("a.yaml", named("a"))
	write("b.yaml", named("b"))
	w, _ := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	b := w.files[filepath.Join(dir, "b.yaml")][0]
	if msg, ok := w.checked[b]; !ok || msg != "" || len(w.checked) != 2 {
		t.Fatalf("after the first load: checked %v, want both policies, without problems", w.checked)
	}
	w.checked[b] = "spec: marked"

	write("a.yaml", strings.Replace(named("a"), "port: 10080", "port: 9090", 1))
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "b.yaml") + ": default/b: spec: marked"}
	if got := w.Errors(); !slices.Equal(got, want) {
		t.Errorf("b.yaml did not change, so its check stands: errors %q, want %q", got, want)
	}
	if len(w.checked) != 2 {
		t.Errorf("checked holds %d policies, want the 2 of this load", len(w.checked))
	}

	write("b.yaml", strings.Replace(named("b"), "port: 10080", "port: 70000", 1))
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := w.Errors(); len(got) != 1 || !strings.Contains(got[0], "spec.listener.port") || strings.Contains(got[0], "marked") {
		t.Errorf("b.yaml changed to port 70000: errors %q, want one naming spec.listener.port", got)
	}
}

// Files are decoded in parallel; the load must still give the policies and the errors of a serial load, in
// its order. The reference here decodes, redacts and validates each file one after the other. The first file
// is the largest, so that it finishes last when the files are decoded side by side.
func TestConfigDirParallelLoadMatchesSerial(t *testing.T) {
	dir := t.TempDir()
	doc := named
	var names []string
	content := map[string]string{}
	for i := range 40 {
		n := 3
		if i == 0 {
			n = 300
		}
		var docs []string
		for j := range n {
			d := doc(fmt.Sprintf("p%02d-%03d", i, j))
			switch {
			case i%5 == 1 && j == 1:
				d = strings.Replace(d, "port: 10080", "port: notanumber", 1) // does not decode
			case i%7 == 2 && j == 0:
				d = strings.Replace(d, "port: 10080", "port: 70000", 1) // decodes, does not validate
			case i == 9 && j == 2:
				d = "a: *undefined\n" // not YAML
			}
			docs = append(docs, d)
		}
		name := fmt.Sprintf("f%02d.yaml", i)
		content[name] = strings.Join(docs, "---\n")
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The duplicate of a name in a later file is an error of that file, found in path order.
	if err := os.WriteFile(filepath.Join(dir, "zz.yaml"), []byte(doc("p03-000")), 0o644); err != nil {
		t.Fatal(err)
	}
	names = append(names, "zz.yaml")
	content["zz.yaml"] = doc("p03-000")

	// As Load does: every file's decode errors first, then each policy's problems, both in path order.
	var wantErrs, wantNames []string
	decoded := map[string][]manifest.Document{}
	for _, name := range names {
		docs, err := manifest.Decode(filepath.Join(dir, name), strings.NewReader(content[name]))
		if err != nil {
			wantErrs = append(wantErrs, redact(err)...)
		}
		decoded[name] = docs
	}
	seen := map[objkey.Key]bool{}
	for _, name := range names {
		p := filepath.Join(dir, name)
		for _, d := range decoded[name] {
			k := objkey.Of(d.Policy)
			if seen[k] {
				wantErrs = append(wantErrs, fmt.Sprintf("%s: %s is defined twice in %s", p, k, dir))
				continue
			}
			seen[k] = true
			if _, fe := translate.Prepare(d.Policy, reach.Loopback); len(fe) > 0 {
				wantErrs = append(wantErrs, fmt.Sprintf("%s: %s: %s", p, k, fe.Error()))
				continue
			}
			wantNames = append(wantNames, d.Policy.Name)
		}
	}
	if len(wantErrs) < 15 || len(wantNames) < 400 {
		t.Fatalf("the reference has %d errors and %d policies: the fixture is not what the test means", len(wantErrs), len(wantNames))
	}

	w, _ := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := w.Errors(); !slices.Equal(got, wantErrs) {
		t.Errorf("errors differ from a serial load:\n got %q\nwant %q", got, wantErrs)
	}
	var gotNames []string
	for _, p := range w.Engine.Policies(engine.SourceConfigDir) {
		gotNames = append(gotNames, p.Name)
	}
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("policies differ from a serial load, or are in another order:\n got %q\nwant %q", gotNames, wantNames)
	}
}

// A file of a million "---" lines, and one of more documents than manifest.MaxDocuments, are each one error
// and one log line, and each keeps the file's last good version in service; a file with several broken
// policies is one log line too, with their count.
func TestConfigDirDocumentBombs(t *testing.T) {
	dir := t.TempDir()
	write := writer(t, dir)
	write("dashes.yaml", named("dashes"))
	write("objects.yaml", named("objects"))
	w, log := newWatcher(t, dir)
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	write("dashes.yaml", strings.Repeat("---\n", (MaxFileBytes/4)-1))
	write("objects.yaml", strings.Repeat("{}\n---\n", manifest.MaxDocuments+1))
	write("three.yaml", strings.Repeat("---\nkind: LoadBalancerPolicy\nmetadata: {name: x}\nspec: {}\n", 3))
	log.Reset()
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var errLines []string
	for _, l := range lines {
		if strings.Contains(l, "level=ERROR") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 3 {
		t.Fatalf("%d error lines, want one per file (3):\n%s", len(errLines), log)
	}
	for _, want := range []string{"dashes.yaml: more than 10000 documents", "objects.yaml: more than 10000 documents", "problems=3"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	if got := len(w.Errors()); got < 5 {
		t.Errorf("Errors lists %d problems, want each of them (5)", got)
	}
	var names []string
	for _, p := range w.Engine.Policies(engine.SourceConfigDir) {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"dashes", "objects"}) {
		t.Errorf("policies served: %v, want the last good dashes and objects", names)
	}
}
