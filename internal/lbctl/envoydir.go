package lbctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// An Envoy's own files (its certificate and key, the bootstrap lbctl envoy runs, its admin socket) go by
// default into a directory of this user's state, not the working directory: a checkout is often a files
// root of lbplane serve (getting started's --files-root .), where a policy could name the key, and `git add
// -A` would commit it. The directory is $XDG_STATE_HOME/lbplane/envoy/<node-id> (XDG's default
// ~/.local/state), made 0700 by lbctl; the admin socket beside the key, where only this user can create or
// replace it, rather than at a name in the shared temporary directory that another user could take first.

// envoyDirDoc is the default directory as the flags' help shows it.
const envoyDirDoc = "$XDG_STATE_HOME/lbplane/envoy/<node-id>, by default ~/.local/state/lbplane/envoy/<node-id>"

// defaultEnvoyDir is this user's directory for the Envoy of node nodeID.
func defaultEnvoyDir(nodeID string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(base) {
		// XDG: a relative value is invalid and ignored.
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no directory for the Envoy's files: %v; give one with --out-dir", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "lbplane", "envoy", nodeID), nil
}

// privateDir makes dir, and each missing parent, with mode 0700, and checks that it is a directory of this
// user's that no one else can write to (where a file or a socket could be swapped for another's). flag
// names the setting in errors.
func privateDir(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s: %s is not a directory (a symlink is not followed)", flag, dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s: %s belongs to another user (uid %d): Envoy's files must be in a directory of the user lbctl and Envoy run as", flag, dir, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s: %s can be written by others (mode %v): chmod 700 it, or choose another directory", flag, dir, fi.Mode().Perm())
	}
	return nil
}

// maxSocketPath is the longest path a Unix socket address holds (sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// adminSocketIn is the admin socket's path in the Envoy's directory; when that path is too long for a Unix
// socket, it is in a new directory (0700, random name) under $XDG_RUNTIME_DIR or the temporary directory,
// made now.
func adminSocketIn(dir string) (string, error) {
	if sock := filepath.Join(dir, "admin.sock"); len(sock) <= maxSocketPath {
		return sock, nil
	}
	base := os.Getenv("XDG_RUNTIME_DIR")
	if !filepath.IsAbs(base) {
		base = os.TempDir()
	}
	d, err := os.MkdirTemp(base, "lbplane-envoy-")
	if err != nil {
		return "", fmt.Errorf("--admin-socket: %s/admin.sock is too long for a Unix socket, and no directory could be made for it: %w", dir, err)
	}
	sock := filepath.Join(d, "admin.sock")
	if len(sock) > maxSocketPath {
		os.Remove(d)
		return "", errors.New("--admin-socket: no path short enough for a Unix socket; give one with --admin-socket")
	}
	return sock, nil
}
