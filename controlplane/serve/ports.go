package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lbplane/lbplane/atomicfile"
)

// PortsFile, in the data directory, holds the addresses lbplane actually bound. Every address flag accepts
// port 0, so whoever starts lbplane (a test, a supervisor) lets the kernel pick free ports and reads them
// here, instead of picking a port that another process could take before lbplane binds it.
const PortsFile = "ports.json"

// Ports are the bound addresses, host:port. The file appears once all of them are bound, and is removed at
// start, so its presence means this run is listening.
type Ports struct {
	XDS     string `json:"xds"`
	API     string `json:"api"`
	Metrics string `json:"metrics,omitempty"`
}

// writePorts writes the file atomically: a reader never sees it half written.
func writePorts(dataDir string, p Ports) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, PortsFile), append(b, '\n'), 0o600)
}

func removePorts(dataDir string) error {
	if err := os.Remove(filepath.Join(dataDir, PortsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the last run's %s: %w", PortsFile, err)
	}
	return nil
}

// ReadPorts returns the addresses of the lbplane that runs on dataDir; an error wrapping os.ErrNotExist means
// it is not listening (yet).
func ReadPorts(dataDir string) (Ports, error) {
	var p Ports
	b, err := os.ReadFile(filepath.Join(dataDir, PortsFile))
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", PortsFile, err)
	}
	return p, nil
}
