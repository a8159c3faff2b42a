package docblocks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTagsSessionsHostsAndIndentation(t *testing.T) {
	root := t.TempDir()
	page := filepath.Join(root, "docs", "p.md")
	if err := os.MkdirAll(filepath.Dir(page), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "# p\n\n```sh\necho one\n```\n\n```text\n```sh inside text is not a block\n```\n\n" +
		"1. step\n\n   ```sh hosts host=lb1\n   for h in a b; do\n     echo $h\n   done\n   ```\n\n" +
		"```sh cluster session=any\nkubectl get pods\n```\n"
	if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Read(root, page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("want 3 blocks, got %d: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Tag != "" || b.Session != "main" || b.Text != "echo one\n" || b.Where() != "docs/p.md:3" {
		t.Errorf("block 1: %+v", b)
	}
	if b := blocks[1]; b.Tag != Hosts || b.Host != "lb1" || b.Text != "for h in a b; do\n  echo $h\ndone\n" {
		t.Errorf("block 2 (indented in a list item): %+v %q", b, b.Text)
	}
	if b := blocks[2]; b.Tag != Cluster || b.Session != "any" {
		t.Errorf("block 3: %+v", b)
	}
	order, by := Sessions(blocks)
	if strings.Join(order, ",") != "main,any" || len(by["main"]) != 2 {
		t.Errorf("sessions %v %v", order, by)
	}
}

func TestReadRefusesWhatBreaksTheConvention(t *testing.T) {
	root := t.TempDir()
	for name, doc := range map[string]string{
		"bash fence":         "```bash\necho\n```\n",
		"unknown tag":        "```sh later\necho\n```\n",
		"host= not on hosts": "```sh host=lb1\necho\n```\n",
		"not closed":         "```sh\necho\n",
	} {
		page := filepath.Join(root, strings.ReplaceAll(name, " ", "-")+".md")
		if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(root, page); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), filepath.Base(page)+":1") {
			t.Errorf("%s: the error does not name page and line: %v", name, err)
		}
	}
}

func TestScriptAnnouncesEachBlockAndEndsWithDone(t *testing.T) {
	blocks := []Block{{Page: "README.md", Line: 3, Text: "echo one\n"}, {Page: "docs/ha.md", Line: 44, Text: "echo 8080\n"}}
	got := Script("set -e\n", blocks, func(s string) string { return strings.ReplaceAll(s, "8080", "8580") })
	want := "set -e\n" +
		"echo \"### block 1 of 2: README.md:3\"\necho one\n" +
		"echo \"### block 2 of 2: docs/ha.md:44\"\necho 8580\n" +
		"echo '" + Done + "'\n"
	if got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
}

func TestEnvironLeavesOutWhatTheBlocksSay(t *testing.T) {
	t.Setenv("LBPLANE_TOKEN", "x")
	t.Setenv("KUBECONFIG", "/k")
	t.Setenv("DOCBLOCKS_KEPT", "1")
	t.Setenv("DOCBLOCKS_DROPPED", "1")
	env := strings.Join(Environ("DOCBLOCKS_DROPPED"), "\n") + "\n"
	for _, gone := range []string{"LBPLANE_TOKEN=", "KUBECONFIG=", "DOCBLOCKS_DROPPED="} {
		if strings.Contains("\n"+env, "\n"+gone) {
			t.Errorf("%s is still in the environment", gone)
		}
	}
	if !strings.Contains(env, "DOCBLOCKS_KEPT=1\n") {
		t.Error("DOCBLOCKS_KEPT was dropped")
	}
}
