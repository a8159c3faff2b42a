package lbctl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/manifest"
)

func newPushConfig(g *globals) *cobra.Command {
	return pushCommand(g, "push-config", `  lbctl push-config -f examples/round-robin.yaml
  lbctl push-config -f policies/            # every *.yaml, *.yml and *.json in the directory
  cat policy.yaml | lbctl push-config -f -
  lbctl push-config -f policy.yaml --dry-run
  lbctl push-config -f policy.yaml --rollout staged  # in stages, rolled back on a breach
  lbctl push-config -f shop.yaml -f api.yaml  # both, in one all-or-nothing push`)
}

// newApply is push-config under the name kubectl users reach for.
func newApply(g *globals) *cobra.Command {
	cmd := pushCommand(g, "apply", `  lbctl apply -f examples/round-robin.yaml
  lbctl apply -f policies/ -o name
  lbctl apply -f policy.yaml --dry-run`)
	cmd.Short += " (the same as push-config)"
	return cmd
}

func pushCommand(g *globals, name, example string) *cobra.Command {
	var files []string
	var dryRun bool
	var mode string
	var out *outputFlags
	cmd := &cobra.Command{
		Use:     name + " -f FILE|DIR|- [-f ...]",
		Short:   "Push policies to lbplane: every document is accepted, or none is",
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if g.kube.enabled() {
				return errors.New("in Kubernetes mode lbplane takes its policies from the cluster: use kubectl apply -f")
			}
			if mode != "" && mode != "staged" && mode != "immediate" {
				return fmt.Errorf("--rollout: must be staged or immediate, got %q", mode)
			}
			return pushConfig(cmd, g, out, files, dryRun, mode)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - for standard input (repeatable: every one is pushed, all or nothing)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check everything the server would check, change nothing, and preview the traffic (as lbctl diff --traffic)")
	cmd.Flags().StringVar(&mode, "rollout", "", "staged: the changes reach the Envoys in stages, each judged on their stats and rolled back on a breach (lbctl rollout status); immediate: every Envoy at once; default: the policy's spec.rollout, else the server's --rollout-default")
	cmd.MarkFlagRequired("filename")
	out = addOutputFlags(cmd, "")
	return cmd
}

var requestDoc = regexp.MustCompile(`request#(\d+)`)

func pushConfig(cmd *cobra.Command, g *globals, out *outputFlags, files []string, dryRun bool, mode string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	body, sources, err := readBodies(files, cmd.InOrStdin())
	if err != nil {
		return err
	}
	res, err := c.ApplyRollout(cmd.Context(), body, dryRun, mode)
	if err != nil {
		// The server numbers documents in the order sent; name them by file instead.
		return renameSources(err, sources)
	}
	names := make([]string, len(res.Policies))
	for i, p := range res.Policies {
		names[i] = policyName(p.Name)
		for _, w := range p.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s/%s: %s\n", p.Namespace, p.Name, w)
		}
	}
	err = out.Print(cmd.OutOrStdout(), printable{Object: res, Names: names, Text: func(w io.Writer, _ bool) error {
		suffix := ""
		if res.DryRun {
			suffix = " (dry run)"
		}
		for _, p := range res.Policies {
			fmt.Fprintf(w, "%s/%s %s (generation %d)%s\n", p.Namespace, p.Name, p.Outcome, p.Generation, suffix)
		}
		if len(res.Lagging) > 0 {
			// The others have the change; these get it as they answer.
			more := ""
			if n := max(res.LaggingTotal, len(res.Lagging)) - len(res.Lagging); n > 0 {
				more = fmt.Sprintf(" and %d more", n)
			}
			fmt.Fprintf(w, "not yet acknowledged by %d Envoy(s): %s%s\n", max(res.LaggingTotal, len(res.Lagging)), strings.Join(res.Lagging, ", "), more)
		}
		return nil
	}})
	// The preview is for people: a machine format stays one document.
	if err == nil && res.DryRun && out.isHuman() {
		dryRunTraffic(cmd, c, body)
	}
	return err
}

// readBodies reads every -f in order into one multi-document body, so that they are pushed together: all
// or nothing, as one file would be. Standard input may be named once.
func readBodies(files []string, stdin io.Reader) ([]byte, []string, error) {
	if len(files) == 1 {
		return readBody(files[0], stdin)
	}
	if len(files) == 0 {
		return nil, nil, errors.New("-f: name a file, a directory or - for standard input")
	}
	if len(slices.DeleteFunc(slices.Clone(files), func(f string) bool { return f != "-" })) > 1 {
		return nil, nil, errors.New("-f -: standard input can be read once")
	}
	var buf bytes.Buffer
	var sources []string
	for _, f := range files {
		b, src, err := readBody(f, stdin)
		if err != nil {
			return nil, nil, err
		}
		if buf.Len() > 0 {
			buf.WriteString("\n---\n")
		}
		buf.Write(b)
		sources = append(sources, src...)
	}
	return buf.Bytes(), sources, nil
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
