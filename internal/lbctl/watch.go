package lbctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"time"

	"github.com/spf13/cobra"
)

// watchFlags is --watch for commands that show state which changes (get, status). The push API has no
// change stream, so a watch polls it every --interval. Tables and machine formats are printed again only
// when the answer differs from the last one printed, as kubectl get --watch prints changes; an answer
// printed as text (status NAME, whose load moves all the time) redraws the screen instead, as top does. It
// ends on Ctrl-C (the command's context), after --watch-timeout, or after --watch-max printed answers, so a
// script never hangs on it.
type watchFlags struct {
	on       bool
	interval time.Duration
	timeout  time.Duration
	max      int
}

func (w *watchFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVarP(&w.on, "watch", "w", false, "after the first answer, print again each time it changes, until Ctrl-C")
	f.DurationVar(&w.interval, "interval", 2*time.Second, "how often --watch asks")
	f.DurationVar(&w.timeout, "watch-timeout", 0, "end --watch after this long (0: until Ctrl-C)")
	f.IntVar(&w.max, "watch-max", 0, "end --watch after printing this many answers, the first included (0: no limit)")
}

var transitionTime = regexp.MustCompile(`"lastTransitionTime":"[^"]*"`)

// run prints fetch's answer once, or, with --watch, again each time it changes.
func (w *watchFlags) run(cmd *cobra.Command, out *outputFlags, fetch func(context.Context) (printable, error)) error {
	ctx := cmd.Context()
	if !w.on {
		p, err := fetch(ctx)
		if err != nil {
			return err
		}
		return out.Print(cmd.OutOrStdout(), p)
	}
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	interval := max(w.interval, 100*time.Millisecond)
	if out.isHuman() {
		if first, err := fetch(ctx); err == nil && first.Text != nil {
			return watchStatus(ctx, cmd.OutOrStdout(), interval, func(wr io.Writer) error {
				p, err := fetch(ctx)
				if err != nil {
					return err
				}
				return out.Print(wr, p)
			})
		}
	}
	var last []byte
	printed := 0
	for {
		p, err := fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // ended by Ctrl-C or --watch-timeout while asking
			}
			return err
		}
		// Answers are compared as data, not as printed: a table's AGE moves every second without
		// anything having changed. So does lastTransitionTime in standalone mode, where the push API
		// computes conditions afresh on each call.
		cur, err := json.Marshal(p.Object)
		if err != nil {
			return err
		}
		cur = transitionTime.ReplaceAll(cur, nil)
		if !bytes.Equal(cur, last) {
			last = cur
			if err := out.Print(cmd.OutOrStdout(), p); err != nil {
				return err
			}
			printed++
			if w.max > 0 && printed >= w.max {
				return nil
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
