// Package atomicfile writes files that a reader (Envoy watching its credentials directory, lbctl reading the
// ports file, lbplane re-reading its keys) sees whole or not at all. It sits below controlplane and
// envoy-bootstrap, which both write such files, and imports nothing of lbplane.
package atomicfile

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write writes data to a temporary file in path's directory, syncs it and renames it over path, so a reader
// never sees a half-written file and a crash leaves the old one or the new one. The file gets exactly perm,
// whatever the umask or the permissions of the file it replaces: a key written 0600 stays 0600.
func Write(path string, data []byte, perm os.FileMode) error {
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(perm))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}
