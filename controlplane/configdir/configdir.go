// Package configdir loads policies from a directory of YAML files and reloads it when a file changes, for
// GitOps-style use. A file that stops decoding, or a policy that stops validating, keeps its last good
// version in service; the error is logged and reported by Errors.
package configdir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Watcher feeds a directory to the engine.
type Watcher struct {
	Dir      string
	Engine   *engine.Engine
	Log      *slog.Logger
	Interval time.Duration

	mu          sync.Mutex
	fingerprint string
	files       map[string][]*v1alpha1.LoadBalancerPolicy // last good decode of each file
	good        map[translate.Key]*v1alpha1.LoadBalancerPolicy
	firstSeen   map[translate.Key]time.Time
	errors      []string
}

// Errors returns the problems of the last load.
func (w *Watcher) Errors() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errors)
}

// Load reads the directory once and publishes it if anything changed.
func (w *Watcher) Load() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.files == nil {
		w.files, w.good, w.firstSeen = map[string][]*v1alpha1.LoadBalancerPolicy{}, map[translate.Key]*v1alpha1.LoadBalancerPolicy{}, map[translate.Key]time.Time{}
	}
	paths, err := manifest.PolicyFiles(w.Dir)
	if err != nil {
		return err
	}
	fp, contents := fingerprint(paths)
	if fp == w.fingerprint {
		return nil
	}
	w.fingerprint = fp
	var errs []string
	files := map[string][]*v1alpha1.LoadBalancerPolicy{}
	for _, p := range paths {
		data, ok := contents[p]
		if !ok {
			continue
		}
		docs, err := manifest.Decode(p, bytes.NewReader(data))
		if err != nil {
			errs = append(errs, err.Error())
			if prev, ok := w.files[p]; ok {
				files[p] = prev // keep the last good version of the whole file
				continue
			}
		}
		for _, d := range docs {
			files[p] = append(files[p], d.Policy)
		}
	}
	w.files = files
	var policies []*v1alpha1.LoadBalancerPolicy
	now := time.Now().UTC().Truncate(time.Second)
	seen := map[translate.Key]bool{}
	for _, p := range paths {
		for _, pol := range files[p] {
			k := translate.KeyOf(pol)
			if seen[k] {
				errs = append(errs, fmt.Sprintf("%s: %s is defined twice in %s", p, k, w.Dir))
				continue
			}
			seen[k] = true
			problems := ""
			if _, fe := translate.Prepare(pol); len(fe) > 0 {
				problems = fe.Error()
			} else if ferrs := w.Engine.FileErrors(pol); len(ferrs) > 0 {
				problems = strings.Join(ferrs, "; ")
			}
			if problems != "" {
				errs = append(errs, fmt.Sprintf("%s: %s: %s", p, k, problems))
				if g, ok := w.good[k]; ok {
					policies = append(policies, g)
				}
				continue
			}
			if _, ok := w.firstSeen[k]; !ok {
				w.firstSeen[k] = now
			}
			c := *pol
			c.Namespace = k.Namespace
			if c.CreationTimestamp.IsZero() {
				c.CreationTimestamp = metav1.NewTime(w.firstSeen[k])
			}
			if c.Generation == 0 {
				c.Generation = 1
			}
			w.good[k] = &c
			policies = append(policies, &c)
		}
	}
	for k := range w.good {
		if !seen[k] {
			delete(w.good, k)
			delete(w.firstSeen, k)
		}
	}
	w.errors = errs
	for _, e := range errs {
		w.Log.Error("config-dir", "error", e)
	}
	w.Engine.Set(engine.SourceConfigDir, policies)
	w.Log.Info("config-dir loaded", "dir", w.Dir, "policies", len(policies), "errors", len(errs))
	return nil
}

// Run reloads the directory every Interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	interval := w.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.Load(); err != nil {
				w.Log.Error("config-dir", "dir", w.Dir, "error", err)
			}
		}
	}
}

// fingerprint hashes names and contents: polling beats inotify here because it also sees files replaced
// through symlink swaps (Kubernetes ConfigMaps, git checkouts) and works on every filesystem.
func fingerprint(paths []string) (string, map[string][]byte) {
	h := sha256.New()
	contents := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		contents[p] = data
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), contents
}
