package lbctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
)

// Exit codes of lbctl rollout status, after kubectl rollout status: 0 when the rollout succeeded, or the
// policy has none under way (settled: never staged, undone), or, with --watch=false, one is under way; 1
// when it was rolled back or aborted, 2 when --timeout passed first.
const (
	rolloutExitFailed  = 1
	rolloutExitTimeout = 2
)

func newRollout(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status|pause|resume|abort|undo NAME",
		Short: "See and steer a policy's staged rollout (lbctl push-config --rollout staged, spec.rollout)",
		Example: `  lbctl rollout status shop             # follows it until it succeeds (exit 0) or is rolled back (exit 1)
  lbctl rollout status shop --watch=false
  lbctl rollout pause shop
  lbctl rollout resume shop             # a paused rollout goes on; a rolled-back one starts again
  lbctl rollout abort shop              # every Envoy back on the previous generation now
  lbctl rollout undo shop               # push the previous generation back as the spec
  lbctl --kubeconfig ~/.kube/config rollout pause shop -n shop   # Kubernetes mode: annotates the policy`,
	}
	cmd.AddCommand(newRolloutStatus(g))
	for _, a := range []struct{ name, short string }{
		{"pause", "Hold a rollout at its stage: no more judging or moving on until resumed"},
		{"resume", "Resume a paused rollout, or start a rolled-back or aborted one again from the first stage"},
		{"abort", "Roll a rollout back now: every Envoy runs the previous generation"},
		{"undo", "Make the previous generation the policy's spec again, on every Envoy at once"},
	} {
		cmd.AddCommand(newRolloutAction(g, a.name, a.short))
	}
	return cmd
}

func newRolloutStatus(g *globals) *cobra.Command {
	var namespace string
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:               "status NAME",
		Short:             "Follow a policy's staged rollout to its end (--watch=false: show where it stands once)",
		Example:           "  lbctl rollout status shop\n  lbctl rollout status shop --timeout 10m\n  lbctl rollout status shop --watch=false",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			var read func(ctx context.Context) (*apiwire.RolloutResult, error)
			if g.kube.enabled() {
				kc, err := g.kube.connect()
				if err != nil {
					return err
				}
				read = func(ctx context.Context) (*apiwire.RolloutResult, error) {
					return kubeRollout(ctx, kc, namespace, args[0])
				}
			} else {
				c, err := g.client()
				if err != nil {
					return err
				}
				read = func(ctx context.Context) (*apiwire.RolloutResult, error) { return c.Rollout(ctx, namespace, args[0]) }
			}
			deadline := time.Now().Add(timeout)
			last := ""
			for {
				r, err := read(cmd.Context())
				if err != nil {
					return err
				}
				line := rolloutLine(r)
				if line != last {
					fmt.Fprintln(cmd.OutOrStdout(), line)
					last = line
				}
				switch r.Rollout.Phase {
				case v1alpha1.RolloutSucceeded, "":
					return nil
				case v1alpha1.RolloutRolledBack, v1alpha1.RolloutAborted:
					return &exitCode{code: rolloutExitFailed, err: fmt.Errorf("rollout of %s/%s %s", namespace, args[0], strings.ToLower(r.Rollout.Phase))}
				}
				if !watch {
					return nil
				}
				if timeout > 0 && time.Now().After(deadline) {
					return &exitCode{code: rolloutExitTimeout, err: fmt.Errorf("timed out after %s waiting for the rollout of %s/%s", timeout, namespace, args[0])}
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace")
	cmd.Flags().BoolVarP(&watch, "watch", "w", true, "follow the rollout until it succeeds or is rolled back (as kubectl rollout status); --watch=false prints once")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --watch: give up after this long (exit 2); 0 waits for ever")
	return cmd
}

// rolloutLine is one line a person reads: phase, stage, canaries, the message and the last numbers.
func rolloutLine(r *apiwire.RolloutResult) string {
	ro := r.Rollout
	if ro.Phase == "" {
		return fmt.Sprintf("%s generation %d: settled: %s", r.Policy, r.Generation, ro.Message)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s generation %d", r.Policy, ro.CandidateGeneration)
	if ro.BaselineGeneration > 0 {
		fmt.Fprintf(&b, " (baseline %d)", ro.BaselineGeneration)
	}
	fmt.Fprintf(&b, ": %s", ro.Phase)
	if ro.Stages > 0 {
		fmt.Fprintf(&b, ", stage %d of %d", ro.Stage, ro.Stages)
	}
	if len(ro.Canaries) > 0 {
		fmt.Fprintf(&b, ", canaries %s", strings.Join(ro.Canaries, ","))
	}
	if len(ro.Flagged) > 0 {
		fmt.Fprintf(&b, ", not believed %s", strings.Join(ro.Flagged, ","))
	}
	if ro.Message != "" {
		fmt.Fprintf(&b, ": %s", ro.Message)
	}
	return b.String()
}

func newRolloutAction(g *globals, action, short string) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:               action + " NAME",
		Short:             short,
		Example:           "  lbctl rollout " + action + " shop",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicyNames(g, &namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.kube.enabled() {
				kc, err := g.kube.connect()
				if err != nil {
					return err
				}
				msg, err := kubeRolloutAction(cmd.Context(), kc, namespace, args[0], action)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.RolloutAction(cmd.Context(), namespace, args[0], action)
			if err != nil {
				return err
			}
			return printRollout(cmd.OutOrStdout(), r)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", v1alpha1.DefaultNamespace, "namespace")
	return cmd
}

func printRollout(w io.Writer, r *apiwire.RolloutResult) error {
	_, err := fmt.Fprintln(w, rolloutLine(r))
	return err
}
