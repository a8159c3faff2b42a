package lbctl

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/manifest"
)

func newPushConfig(g *globals) *cobra.Command {
	var file string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "push-config -f FILE|DIR|-",
		Short: "Push policies to lbplane: every document is accepted, or none is",
		Example: `  lbctl push-config -f examples/round-robin.yaml
  lbctl push-config -f policies/            # every *.yaml, *.yml and *.json in the directory
  cat policy.yaml | lbctl push-config -f -
  lbctl push-config -f policy.yaml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return pushConfig(cmd, g, file, dryRun)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "file, directory or - for standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check everything the server would check, change nothing, and preview the traffic (as lbctl diff --traffic)")
	cmd.MarkFlagRequired("filename")
	return cmd
}

var requestDoc = regexp.MustCompile(`request#(\d+)`)

func pushConfig(cmd *cobra.Command, g *globals, file string, dryRun bool) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	body, sources, err := readBody(file, cmd.InOrStdin())
	if err != nil {
		return err
	}
	res, err := c.Apply(cmd.Context(), body, dryRun)
	if err != nil {
		// The server numbers documents in the order sent; name them by file instead.
		return renameSources(err, sources)
	}
	suffix := ""
	if res.DryRun {
		suffix = " (dry run)"
	}
	for _, p := range res.Policies {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s (generation %d)%s\n", p.Namespace, p.Name, p.Outcome, p.Generation, suffix)
		for _, w := range p.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s/%s: %s\n", p.Namespace, p.Name, w)
		}
	}
	if res.DryRun {
		dryRunTraffic(cmd, c, body)
	}
	return nil
}

// readBody decodes the input locally first, so that a broken file is reported by name before anything is
// sent, and returns the documents as one multi-document body.
func readBody(file string, stdin io.Reader) ([]byte, []string, error) {
	var raw []byte
	if file == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, nil, err
		}
		raw, stdin = b, bytes.NewReader(b)
	}
	docs, err := manifest.ReadPath(file, stdin)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) == 0 {
		return nil, nil, fmt.Errorf("%s holds no policy", file)
	}
	if raw != nil {
		return raw, sourcesOf(docs), nil
	}
	var buf bytes.Buffer
	if info, err := os.Stat(file); err == nil && !info.IsDir() {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, err
		}
		return b, sourcesOf(docs), nil
	}
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("\n---\n")
		}
		buf.Write(d.Raw)
	}
	return buf.Bytes(), sourcesOf(docs), nil
}

func sourcesOf(docs []manifest.Document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Source
	}
	return out
}

func renameSources(err error, sources []string) error {
	return mapErrors(err, func(s string) string {
		return requestDoc.ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.Atoi(requestDoc.FindStringSubmatch(m)[1])
			if n >= 1 && n <= len(sources) {
				return sources[n-1]
			}
			return m
		})
	})
}
