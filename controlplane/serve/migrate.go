package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lbplane/lbplane/controlplane/pki"
	"github.com/lbplane/lbplane/controlplane/store"
)

// A data directory's CA and tokens, as lbplane store migrate carries them between a data directory and
// etcd (where serve --store etcd keeps them sealed).

// SecretsFromDir reads a data directory's CA and tokens (those present).
func SecretsFromDir(dir string) (*store.Secrets, error) {
	sec := &store.Secrets{}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	var err error
	if sec.CACert, err = read(filepath.Join(PKIDir, pki.CACertFile)); err != nil {
		return nil, err
	}
	if sec.CAKey, err = read(filepath.Join(PKIDir, pki.CAKeyFile)); err != nil {
		return nil, err
	}
	t, err := read(TokenFile)
	if err != nil {
		return nil, err
	}
	ro, err := read(ReadOnlyTokenFile)
	if err != nil {
		return nil, err
	}
	sec.Token, sec.ReadOnlyToken = strings.TrimSpace(string(t)), strings.TrimSpace(string(ro))
	if len(sec.CACert) == 0 || len(sec.CAKey) == 0 || sec.Token == "" || sec.ReadOnlyToken == "" {
		return nil, fmt.Errorf("%s lacks its CA (pki/ca.crt, pki/ca.key) or its tokens (token, token-readonly): start lbplane serve on it once", dir)
	}
	return sec, nil
}

// WriteSecretsToDir writes the CA and tokens where lbplane serve --data-dir finds them (refusing to
// replace different ones).
func WriteSecretsToDir(dir string, sec *store.Secrets) error {
	if err := os.MkdirAll(filepath.Join(dir, PKIDir), 0o700); err != nil {
		return err
	}
	for name, v := range map[string][]byte{filepath.Join(PKIDir, pki.CACertFile): sec.CACert, filepath.Join(PKIDir, pki.CAKeyFile): sec.CAKey,
		TokenFile: []byte(sec.Token + "\n"), ReadOnlyTokenFile: []byte(sec.ReadOnlyToken + "\n")} {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(old)) != strings.TrimSpace(string(v)) {
			return fmt.Errorf("%s exists and differs from the one in etcd: migrate into a fresh data directory", path)
		}
		if err := os.WriteFile(path, v, 0o600); err != nil {
			return err
		}
	}
	return nil
}
