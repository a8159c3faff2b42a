package serve

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lbplane/lbplane/controlplane/pki"
)

// IssuedKeysFile records, in the data directory, the public key of every certificate lbplane's CA issued
// while its certificate is valid (pki.OwnKeys): such a key is never served to an Envoy, whatever file or
// Secret a policy reads it from.
const IssuedKeysFile = "issued-keys"

// openOwnKeys returns the record of lbplane's own key material: the keys its CA issued (recorded as they
// are issued), and the keys of its own TLS flags, read now. Its CA and serving keys are added when the CA
// is loaded (xdsSecurity).
func openOwnKeys(cfg *Config) (*pki.OwnKeys, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	k, err := pki.OpenOwnKeys(filepath.Join(cfg.DataDir, IssuedKeysFile))
	if err != nil {
		return nil, err
	}
	keys := []string{cfg.APITLSKey, cfg.Etcd.Key}
	if cfg.XDSTLS != nil {
		keys = append(keys, cfg.XDSTLS.Key)
	}
	for _, f := range keys {
		if f == "" {
			continue
		}
		// Unreadable ones are reported by whatever uses them.
		if b, err := os.ReadFile(f); err == nil {
			k.HoldPEM(b)
		}
	}
	return k, nil
}
