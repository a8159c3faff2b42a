// Package configdir loads policies from a directory of YAML files and reloads it when a file changes, for
// GitOps-style use. A file that stops decoding, or a policy that stops validating, keeps its last good
// version in service; the error is logged and reported by Errors.
//
// The directory is read through os.Root, so a symlink in it may point elsewhere in it (Kubernetes ConfigMap
// volumes are built that way) but never out of it; files are stat-ed first and read only when their size,
// mtime or inode changed, and never when over MaxFileBytes. What a file that does not decode held is never
// logged: a symlink to /etc/shadow once had its lines logged as "unknown field" names.
package configdir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Watcher feeds a directory to the engine.
type Watcher struct {
	Dir      string
	Engine   *engine.Engine
	Log      *slog.Logger
	Interval time.Duration
	// Metrics counts the problems each reload finds (lbplane_errors_total{component="config_dir_reload"}).
	Metrics *metrics.Metrics

	mu          sync.Mutex
	root        *os.Root
	fingerprint string
	files       map[string][]*v1alpha1.LoadBalancerPolicy // last good decode of each file
	decoded     map[string]decodedFile                    // each file's last decode, by its stat stamp
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
	if w.root != nil && !w.sameDir() {
		// The directory was replaced (a rename-based deploy): the open root still points at the old one.
		w.root.Close()
		w.root = nil
	}
	if w.root == nil {
		r, err := os.OpenRoot(w.Dir)
		if err != nil {
			return err
		}
		w.root = r
	}
	paths, err := manifest.PolicyFiles(w.Dir)
	if err != nil {
		return err
	}
	fp, infos, errs := w.stat(paths)
	if fp == w.fingerprint {
		return nil
	}
	w.fingerprint = fp
	files := map[string][]*v1alpha1.LoadBalancerPolicy{}
	decoded := map[string]decodedFile{}
	for _, p := range paths {
		info, ok := infos[p]
		// A file whose stamp did not change is not read or decoded again: a change to one file of a
		// directory of 100 costs one file's decoding, not the directory's.
		if d, same := w.decoded[p]; ok && same && d.stamp == stamp(info) {
			decoded[p] = d
			errs = append(errs, d.errs...)
			if d.policies != nil {
				files[p] = d.policies
			}
			continue
		}
		var data []byte
		if ok {
			if data, err = w.read(p, info); err != nil {
				errs = append(errs, err.Error())
				ok = false
			}
		}
		if !ok {
			if prev, ok := w.files[p]; ok {
				files[p] = prev // a file that cannot be read keeps its last good version
			}
			continue
		}
		docs, err := manifest.Decode(p, bytes.NewReader(data))
		d := decodedFile{stamp: stamp(info)}
		if err != nil {
			d.errs = redact(err)
			errs = append(errs, d.errs...)
			if prev, ok := w.files[p]; ok {
				files[p] = prev // keep the last good version of the whole file
				d.policies = prev
				decoded[p] = d
				continue
			}
		}
		for _, d := range docs {
			files[p] = append(files[p], d.Policy)
		}
		d.policies = files[p]
		decoded[p] = d
	}
	w.files = files
	w.decoded = decoded
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
		w.Metrics.Error(metrics.ConfigDirReload)
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
				w.Metrics.Error(metrics.ConfigDirReload)
				w.Log.Error("config-dir", "dir", w.Dir, "error", err)
			}
		}
	}
}

// sameDir reports whether the open root is still the directory at w.Dir.
func (w *Watcher) sameDir() bool {
	now, err := os.Stat(w.Dir)
	if err != nil {
		return true // gone: keep the last good policies, as for a missing file
	}
	open, err := w.root.Stat(".")
	return err == nil && os.SameFile(now, open)
}

// MaxFileBytes caps one file of the directory: a policy is a few KiB, and a manifest of thousands stays far
// below this. A larger file is skipped with an error, never read.
const MaxFileBytes = 4 << 20

// notInside is the error for every file that is not a regular file inside the directory; it does not say
// where a symlink points or what is there.
const notInside = "not a regular file inside the config directory (symlinks must stay inside it); skipped"

// stat fingerprints the policy files by name, size, mtime, ctime and inode, without reading them: polling
// beats inotify here because it also sees files replaced through symlink swaps (Kubernetes ConfigMaps, git
// checkouts) and works on every filesystem, and stat-ing costs nothing next to reading and hashing every
// file every second (a 500 MiB file there once held 2 GB of RSS and 65 % of a core). It returns the files to
// read and the errors of the others.
func (w *Watcher) stat(paths []string) (string, map[string]os.FileInfo, []string) {
	h := sha256.New()
	infos := map[string]os.FileInfo{}
	var errs []string
	for _, p := range paths {
		info, err := w.root.Stat(filepath.Base(p)) // follows symlinks, but only inside the directory
		switch {
		case err != nil || !info.Mode().IsRegular():
			errs = append(errs, fmt.Sprintf("%s: %s", p, notInside))
			fmt.Fprintf(h, "%s\x00bad\x00", p)
			continue
		case info.Size() > MaxFileBytes:
			errs = append(errs, fmt.Sprintf("%s: %d bytes, larger than the %d-byte limit for a policy file; skipped", p, info.Size(), MaxFileBytes))
		default:
			infos[p] = info
		}
		fmt.Fprintf(h, "%s\x00%s\x00", p, stamp(info))
	}
	return hex.EncodeToString(h.Sum(nil)), infos, errs
}

// decodedFile is what one file gave at its last decode: its policies (or, when it stopped decoding, the last
// good ones) and its errors.
type decodedFile struct {
	stamp    string
	policies []*v1alpha1.LoadBalancerPolicy
	errs     []string
}

// stamp identifies a version of a file without reading it: size, mtime, inode and ctime (which any write,
// rename or chmod moves, and which a program cannot set back).
func stamp(info os.FileInfo) string {
	s := fmt.Sprintf("%d\x00%d", info.Size(), info.ModTime().UnixNano())
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		s += fmt.Sprintf("\x00%d\x00%d\x00%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return s
}

// read reads one file that stat found: opened without blocking and checked again with fstat, so that a file
// swapped for a FIFO, a device or a bigger file after the stat is refused rather than read.
func (w *Watcher) read(p string, before os.FileInfo) ([]byte, error) {
	f, err := w.root.OpenFile(filepath.Base(p), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", p, notInside)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || !os.SameFile(before, info) {
		return nil, fmt.Errorf("%s: %s", p, notInside)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %s", p, notInside)
	case len(data) > MaxFileBytes:
		return nil, fmt.Errorf("%s: larger than the %d-byte limit for a policy file; skipped", p, MaxFileBytes)
	}
	return data, nil
}

// yamlLine finds the line number in a YAML parser's message, the only part of it worth keeping.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// quoted matches the values the strict decoder quotes back ("got the string \"...\"").
var quoted = regexp.MustCompile(`the string "(?:[^"\\]|\\.)*"…?`)

// redact turns decode errors into lines that carry nothing of the file's content. A document that does not
// declare itself a LoadBalancerPolicy gets one generic line (its keys are not field names, they are whatever
// the file holds); one that does keeps field paths, which help fix a typo, but not the values; YAML syntax
// errors keep only their line number, since the parser may quote the text it choked on.
func redact(err error) []string {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out []string
	for _, e := range list {
		var de *manifest.DecodeError
		if !errors.As(e, &de) {
			out = append(out, "a file does not decode (details withheld)")
			continue
		}
		msg := de.Err.Error()
		switch {
		case strings.HasPrefix(msg, "not valid YAML") || !de.Declared && strings.Contains(msg, "yaml"):
			where := ""
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				where = " at line " + m[1]
			}
			out = append(out, fmt.Sprintf("%s: not valid YAML%s (content not logged)", de.Source, where))
		case !de.Declared:
			out = append(out, fmt.Sprintf("%s: not a LoadBalancerPolicy (apiVersion %s, kind %s); content not logged", de.Source, v1alpha1.APIVersion, v1alpha1.Kind))
		default:
			out = append(out, de.Source+": "+quoted.ReplaceAllString(msg, "a string"))
		}
	}
	return out
}
