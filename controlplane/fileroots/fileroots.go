// Package fileroots reads the files policies name (certificateFile, privateKeyFile, caFile) from configured
// directories only. A policy is written by whoever holds a push token (or a config-dir file), and what it
// names is read by lbplane and sent to Envoys over SDS: without roots, any key pair on the host could be
// served, /dev/zero exhausted memory, and a FIFO hung the engine.
//
// Path resolution goes through os.Root, which confines it to a directory in the kernel's terms (openat with
// symlinks resolved step by step), so neither "../" nor a symlink can lead out of a root, and a path cannot be
// swapped between a check and the open.
package fileroots

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MaxFileBytes bounds one referenced file: a certificate chain or CA bundle is a few KiB; a large bundle of
// public roots is about 250 KiB.
const MaxFileBytes = 1 << 20

// ErrNotReadable is every refusal that could tell something about the host: a missing file, a file outside
// the roots, a symlink out, a FIFO, a device and a permission error all read the same, so that a policy cannot
// be used to probe the filesystem.
var ErrNotReadable = errors.New("not a readable regular file under the files roots (lbplane serve --files-root)")

// ErrTooLarge is a regular file under a root that is larger than MaxFileBytes; it is inside the roots, so
// saying so tells nothing about the rest of the host.
var ErrTooLarge = fmt.Errorf("larger than %d bytes", MaxFileBytes)

// ErrKubernetes refuses every file reference in Kubernetes mode, where the files of lbplane's pod are not
// the user's to name.
var ErrKubernetes = errors.New("file references are not allowed in Kubernetes mode; reference a kubernetes.io/tls Secret with secretName instead")

// Roots reads files under a set of directories.
type Roots struct {
	roots []root
	deny  []string
	// protected are lbplane's own secrets (keys, tokens, the store): a file that is one of them (same device
	// and inode) is never served, whatever name or path leads to it: a hard link, a bind mount or a copy
	// of the directory entry all name the same inode. Each is stat'ed at every read, because a key that is
	// renewed by rename is a new inode.
	protected []string
	// content, when set, refuses a file by what it holds (pki.OwnKeys.Refuses: a key lbplane issued or
	// holds, wherever it was copied to).
	content func([]byte) bool
}

type root struct {
	// names are the root's path as given and with symlinks resolved: a policy may name either.
	names []string
	r     *os.Root
}

// Open opens every directory as a root, in order: relative references resolve against the first. Deny lists
// directories whose files are never served, whatever path leads there, unless they lie in a root inside the
// denied directory: lbplane's data directory holds the push tokens and CA keys, and a root given as "/" or
// an ancestor of it must not serve them, while <data-dir>/certs is a root by default. Roots and denied
// directories are made absolute and clean here, once: a relative name would be compared with the kernel's
// absolute names of the files opened, and never match.
func Open(dirs []string, deny ...string) (*Roots, error) {
	if len(dirs) == 0 {
		return nil, errors.New("no files root")
	}
	out := &Roots{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			out.Close()
			return nil, err
		}
		r, err := os.OpenRoot(abs)
		if err != nil {
			out.Close()
			return nil, fmt.Errorf("files root %s: %w", d, err)
		}
		names := []string{abs}
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			names = append(names, real)
		}
		out.roots = append(out.roots, root{names: names, r: r})
	}
	for _, d := range deny {
		abs, err := filepath.Abs(d)
		if err != nil {
			out.Close()
			return nil, err
		}
		out.deny = append(out.deny, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			out.deny = append(out.deny, real)
		}
	}
	return out, nil
}

// Protect adds files that are never served, by identity (device and inode) rather than by name: lbplane's
// CA and serving keys, its token files, its store. Paths are made absolute now; a path that does not exist
// yet (or no longer) protects whatever file is created there later.
func (rs *Roots) Protect(paths ...string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		rs.protected = append(rs.protected, abs)
	}
	return nil
}

// RefuseContent refuses every file for which refuse says true of its content, as if it were unreadable:
// lbplane's own keys are recognised by what they are, whatever path, link or copy leads to them.
func (rs *Roots) RefuseContent(refuse func([]byte) bool) { rs.content = refuse }

// isProtected reports whether the opened file (info from fstat) is one of the protected files.
func (rs *Roots) isProtected(info os.FileInfo) bool {
	for _, p := range rs.protected {
		if pi, err := os.Stat(p); err == nil && os.SameFile(pi, info) {
			return true
		}
	}
	return false
}

// Close releases the roots.
func (rs *Roots) Close() {
	for _, r := range rs.roots {
		r.r.Close()
	}
}

// Dirs returns the roots, as given after making them absolute.
func (rs *Roots) Dirs() []string {
	var out []string
	for _, r := range rs.roots {
		out = append(out, r.names[0])
	}
	return out
}

// resolve finds the root a path is under, and the path relative to it. A relative path belongs to the first
// root. It is lexical only; os.Root does the rest.
func (rs *Roots) resolve(path string) (*os.Root, string, bool) {
	if path == "" || strings.ContainsRune(path, 0) {
		return nil, "", false
	}
	if !filepath.IsAbs(path) {
		return rs.roots[0].r, filepath.Clean(path), true
	}
	clean := filepath.Clean(path)
	for _, r := range rs.roots {
		for _, n := range r.names {
			rel, err := filepath.Rel(n, clean)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				continue
			}
			return r.r, rel, true
		}
	}
	return nil, "", false
}

// ReadFile reads a regular file under one of the roots, at most MaxFileBytes of it. Every failure but
// ErrTooLarge is ErrNotReadable.
func (rs *Roots) ReadFile(path string) ([]byte, error) {
	r, rel, ok := rs.resolve(path)
	if !ok {
		return nil, ErrNotReadable
	}
	// Stat first so that a device or FIFO is never even opened (opening some devices has side effects).
	before, err := r.Stat(rel)
	if err != nil || !before.Mode().IsRegular() {
		return nil, ErrNotReadable
	}
	// O_NONBLOCK: should the path turn into a FIFO between the stat and the open, the open does not wait
	// for a writer. O_NOCTTY: a terminal never becomes lbplane's.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, ErrNotReadable
	}
	defer f.Close()
	info, err := f.Stat() // fstat: what was opened, not what the path names now
	if err != nil || !info.Mode().IsRegular() || !os.SameFile(before, info) {
		return nil, ErrNotReadable
	}
	if rs.denied(f) || rs.isProtected(info) {
		return nil, ErrNotReadable
	}
	if info.Size() > MaxFileBytes {
		return nil, ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, ErrNotReadable
	}
	if len(data) > MaxFileBytes { // it grew since the fstat
		return nil, ErrTooLarge
	}
	if rs.content != nil && rs.content(data) {
		return nil, ErrNotReadable
	}
	return data, nil
}

// denied reports whether the opened file lies in a denied directory. The kernel's name for the open file
// (/proc/self/fd) is used, so no symlink or hard-to-spot path leads around it; where /proc is missing, a
// root that contains a denied directory is the operator's choice.
func (rs *Roots) denied(f *os.File) bool {
	if len(rs.deny) == 0 {
		return false
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return false
	}
	for _, d := range rs.deny {
		if !under(real, d) {
			continue
		}
		// A root inside the denied directory (<data-dir>/certs) is still served.
		allowed := false
		for _, r := range rs.roots {
			for _, n := range r.names {
				allowed = allowed || (n != d && under(n, d) && under(real, n))
			}
		}
		if !allowed {
			return true
		}
	}
	return false
}

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Refuse is a reader for Kubernetes mode: every reference is refused with ErrKubernetes.
func Refuse(string) ([]byte, error) { return nil, ErrKubernetes }
