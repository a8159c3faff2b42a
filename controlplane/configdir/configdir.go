// Package configdir loads policies from a directory of YAML files and reloads it when a file changes, for
// GitOps-style use. A file that stops decoding, or a policy that stops validating, keeps its last good
// version in service; the error is logged and reported by Errors.
//
// The directory is read through os.Root, so a symlink in it may point elsewhere in it (Kubernetes ConfigMap
// volumes are built that way) but never out of it; files are stat-ed first and read only when their size,
// mtime or inode changed, and never when over MaxFileBytes. What a file that does not decode held is never
// logged: a symlink to /etc/shadow once had its lines logged as "unknown field" names. Changed files are
// decoded in parallel, but merged in name order: policies and errors come out as a serial load's would.
package configdir

import (
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
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/manifest"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
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
	// good is each key's last good policy, and when the key was first seen valid (its creation time when
	// the file gives none). One map, not two: the two were set and deleted together.
	good map[objkey.Key]goodPolicy
	// checked is what defaulting and validation found in each policy of the last load ("" for nothing): a
	// policy whose file did not change comes back as the same pointer and is not checked again.
	checked map[*v1alpha1.LoadBalancerPolicy]string
	errors  []string
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
		w.files, w.good = map[string][]*v1alpha1.LoadBalancerPolicy{}, map[objkey.Key]goodPolicy{}
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
	// Files are read and decoded in parallel (decoding 100 files of 1,000 documents was 7.6 s of one core in
	// the 100,000-policy cold start), each into its own slot, then merged in path order: the policies, the
	// errors and their order are those of a serial load.
	loads := make([]fileLoad, len(paths))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range paths {
		info, ok := infos[p]
		switch d, same := w.decoded[p]; {
		case !ok:
			loads[i] = fileLoad{unread: true}
		case same && d.stamp == stamp(info):
			// A file whose stamp did not change is not read or decoded again: a change to one file of a
			// directory of 100 costs one file's decoding, not the directory's.
			loads[i] = fileLoad{cached: true, file: d}
		default:
			g.Go(func() error {
				loads[i] = w.load(p, info)
				return nil
			})
		}
	}
	_ = g.Wait() // the tasks return no errors: a file's problems are in its slot
	changed := 0
	for i := range loads {
		if !loads[i].cached {
			changed++
		}
	}
	for p := range w.decoded {
		if _, ok := infos[p]; !ok {
			changed++ // removed
		}
	}
	w.Metrics.SourceChange(metrics.SourceConfigDir, "File", changed)
	files := map[string][]*v1alpha1.LoadBalancerPolicy{}
	decoded := map[string]decodedFile{}
	for i, p := range paths {
		l := loads[i]
		switch {
		case l.cached:
			decoded[p] = l.file
			errs = errs.add(p, l.file.errs...)
			if l.file.policies != nil {
				files[p] = l.file.policies
			}
		case l.unread:
			if l.readErr != "" {
				errs = errs.add(p, l.readErr)
			}
			if prev, ok := w.files[p]; ok {
				files[p] = prev // a file that cannot be read keeps its last good version
			}
		default:
			d := l.file
			errs = errs.add(p, d.errs...)
			if l.failed {
				if prev, ok := w.files[p]; ok {
					files[p] = prev // keep the last good version of the whole file
					d.policies = prev
					decoded[p] = d
					continue
				}
			}
			if len(d.policies) > 0 {
				files[p] = d.policies
			}
			decoded[p] = d
		}
	}
	w.files = files
	w.decoded = decoded
	var policies []*v1alpha1.LoadBalancerPolicy
	now := time.Now().UTC().Truncate(time.Second)
	seen := map[objkey.Key]bool{}
	var invalid []string
	invalid, w.checked = validateAll(paths, files, w.Engine.Reach, w.checked)
	n := -1
	for _, p := range paths {
		for _, pol := range files[p] {
			n++
			k := objkey.Of(pol)
			if seen[k] {
				errs = errs.add(p, fmt.Sprintf("%s: %s is defined twice in %s", p, k, w.Dir))
				continue
			}
			seen[k] = true
			problems := invalid[n]
			if problems == "" {
				if ferrs := w.Engine.FileErrors(pol); len(ferrs) > 0 {
					problems = strings.Join(ferrs, "; ")
				}
			}
			if problems != "" {
				errs = errs.add(p, fmt.Sprintf("%s: %s: %s", p, k, problems))
				if g, ok := w.good[k]; ok {
					policies = append(policies, g.policy)
				}
				continue
			}
			first := now
			if g, ok := w.good[k]; ok {
				first = time.Unix(g.firstSeen, 0).UTC()
			}
			// The decoded policy is completed in place and published as it is, not copied: a copy per policy
			// was 550 bytes each, kept beside the decoded one (55 MB at 100,000). Nothing else sees it before
			// this: a decode is the watcher's own until it is published here, and once completed, a policy
			// whose file did not change comes back as the same pointer, already complete, and is not written
			// again (the engine reads it concurrently). A key keeps its firstSeen for as long as any file
			// holds it, so the time written once is the time a copy would get on every load.
			if pol.Namespace != k.Namespace {
				pol.Namespace = k.Namespace
			}
			if pol.CreationTimestamp.IsZero() {
				pol.CreationTimestamp = metav1.NewTime(first)
			}
			if pol.Generation == 0 {
				pol.Generation = 1
			}
			w.good[k] = goodPolicy{policy: pol, firstSeen: first.Unix()}
			policies = append(policies, pol)
		}
	}
	for k := range w.good {
		if !seen[k] {
			delete(w.good, k)
		}
	}
	w.errors = errs.lines()
	errs.log(w.Log, w.Metrics)
	w.Engine.Set(engine.SourceConfigDir, policies)
	w.Log.Info("config-dir loaded", "dir", w.Dir, "policies", len(policies), "errors", len(w.errors))
	return nil
}

// validateAll defaults and validates the policies of files that before does not hold (a file that did not
// change comes back as the same pointers), in parallel: it is pure, and was 100,000 deep copies and
// validations on one core in a cold start, and again at every reload. It returns each policy's problems
// ("" for none) in path order, and them by policy for the next load.
func validateAll(paths []string, files map[string][]*v1alpha1.LoadBalancerPolicy, rules reach.Rules,
	before map[*v1alpha1.LoadBalancerPolicy]string) ([]string, map[*v1alpha1.LoadBalancerPolicy]string) {
	var all []*v1alpha1.LoadBalancerPolicy
	for _, p := range paths {
		all = append(all, files[p]...)
	}
	out := make([]string, len(all))
	var todo []int
	for i, p := range all {
		if msg, ok := before[p]; ok {
			out[i] = msg
		} else {
			todo = append(todo, i)
		}
	}
	workers := runtime.GOMAXPROCS(0)
	chunk := max((len(todo)+workers-1)/workers, 1)
	var g errgroup.Group
	for lo := 0; lo < len(todo); lo += chunk {
		hi := min(lo+chunk, len(todo))
		g.Go(func() error {
			for _, i := range todo[lo:hi] {
				if _, fe := translate.Prepare(all[i], rules); len(fe) > 0 {
					out[i] = fe.Error()
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	next := make(map[*v1alpha1.LoadBalancerPolicy]string, len(all))
	for i, p := range all {
		next[p] = out[i]
	}
	return out, next
}

// problems are a load's errors, each with the file it is about, in the order they were found.
type problems []problem

type problem struct{ file, msg string }

func (ps problems) add(file string, msgs ...string) problems {
	for _, m := range msgs {
		ps = append(ps, problem{file, m})
	}
	return ps
}

func (ps problems) lines() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.msg
	}
	return out
}

// logPerFile is how many of a file's problems its log line quotes; Errors has them all.
const logPerFile = 3

// log writes one error line per file with problems, however many it has (a file of a million broken
// documents once wrote half a million lines): their count and the first few. Each such file counts once in
// lbplane_errors_total.
func (ps problems) log(log *slog.Logger, m *metrics.Metrics) {
	var order []string
	byFile := map[string][]string{}
	for _, p := range ps {
		if _, ok := byFile[p.file]; !ok {
			order = append(order, p.file)
		}
		byFile[p.file] = append(byFile[p.file], p.msg)
	}
	for _, f := range order {
		msgs := byFile[f]
		first := msgs[:min(len(msgs), logPerFile)]
		attrs := []any{"file", f, "problems", len(msgs), "error", strings.Join(first, "; ")}
		if more := len(msgs) - len(first); more > 0 {
			attrs = append(attrs, "more", more)
		}
		log.Error("config-dir", attrs...)
		m.Error(metrics.ConfigDirReload)
	}
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
func (w *Watcher) stat(paths []string) (string, map[string]os.FileInfo, problems) {
	h := sha256.New()
	infos := map[string]os.FileInfo{}
	var errs problems
	for _, p := range paths {
		info, err := w.root.Stat(filepath.Base(p)) // follows symlinks, but only inside the directory
		switch {
		case err != nil || !info.Mode().IsRegular():
			errs = errs.add(p, fmt.Sprintf("%s: %s", p, notInside))
			fmt.Fprintf(h, "%s\x00bad\x00", p)
			continue
		case info.Size() > MaxFileBytes:
			errs = errs.add(p, fmt.Sprintf("%s: %d bytes, larger than the %d-byte limit for a policy file; skipped", p, info.Size(), MaxFileBytes))
		default:
			infos[p] = info
		}
		fmt.Fprintf(h, "%s\x00%s\x00", p, stamp(info))
	}
	return hex.EncodeToString(h.Sum(nil)), infos, errs
}

// fileLoad is one file's part of a load: reused from the last load, not readable, or read and decoded now.
type fileLoad struct {
	cached, unread bool
	readErr        string // why an unread file could not be read ("" when stat already reported it)
	failed         bool   // the file did not decode in full; file.errs says why
	file           decodedFile
}

// load reads and decodes one file whose stamp changed. It runs beside the loads of other files, so it touches
// nothing of w but the root (safe for concurrent use), and keeps of the decode only the policies: the
// documents' JSON would double what the decode holds until the merge.
func (w *Watcher) load(p string, info os.FileInfo) fileLoad {
	data, err := w.read(p, info)
	if err != nil {
		return fileLoad{unread: true, readErr: err.Error()}
	}
	docs, err := manifest.DecodeBytes(p, data)
	l := fileLoad{file: decodedFile{stamp: stamp(info)}}
	if err != nil {
		l.failed = true
		l.file.errs = redact(err)
	}
	if len(docs) > 0 {
		l.file.policies = make([]*v1alpha1.LoadBalancerPolicy, len(docs))
		for i, d := range docs {
			// The decoder allocates these two strings for every document; the constants cost nothing.
			if d.Policy.APIVersion == v1alpha1.APIVersion {
				d.Policy.APIVersion = v1alpha1.APIVersion
			}
			if d.Policy.Kind == v1alpha1.Kind {
				d.Policy.Kind = v1alpha1.Kind
			}
			l.file.policies[i] = d.Policy
		}
	}
	return l
}

type goodPolicy struct {
	policy *v1alpha1.LoadBalancerPolicy
	// firstSeen is in Unix seconds (load times are whole seconds, UTC): a time.Time is 24 bytes, and the map
	// holds one entry per policy.
	firstSeen int64
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
