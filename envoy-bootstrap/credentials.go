package envoybootstrap

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lbplane/lbplane/atomicfile"
)

// Files WriteCredentials writes. The SDS files are what the bootstrap points Envoy at; the PEM files are
// the same certificate for people and other tools.
const (
	ClientSDSFile = "xds-client.json"
	CASDSFile     = "xds-ca.json"
	CertFile      = "tls.crt"
	KeyFile       = "tls.key"
	CAFile        = "ca.crt"
)

// Credentials are an Envoy's xDS client certificate, its key and the CA it trusts, PEM encoded.
type Credentials struct {
	Cert, Key, CA []byte
}

// CertString, KeyString and CAString are for the template.
func (c *Credentials) CertString() string { return string(c.Cert) }
func (c *Credentials) KeyString() string  { return string(c.Key) }
func (c *Credentials) CAString() string   { return string(c.CA) }

// WriteCredentials writes c into dir (created 0700), each file by an atomic rename so that Envoy, watching
// the directory, never reads a half-written one. The certificate and key travel together inside one SDS
// file, so Envoy can never pair a new certificate with an old key. The CA file goes first: a renewed
// certificate signed by a new CA must never arrive before the CA that verifies lbplane.
func WriteCredentials(dir string, c Credentials) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	files, err := CredentialFiles(c)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := atomicfile.Write(filepath.Join(dir, f.Name), f.Data, f.Perm); err != nil {
			return fmt.Errorf("--out-dir: %w", err)
		}
	}
	return nil
}

// CredentialFile is one file of an Envoy's credentials directory.
type CredentialFile struct {
	Name string
	Data []byte
	Perm os.FileMode
}

// CredentialFiles are the files of an Envoy's credentials directory, in the order they must be written
// (lbctl bootstrap --out-dir, and the group certificate Secrets lbplane keeps in Kubernetes).
func CredentialFiles(c Credentials) ([]CredentialFile, error) {
	client, err := sdsFile(map[string]any{"name": "lbplane_xds_client", "tls_certificate": map[string]any{
		"certificate_chain": map[string]string{"inline_string": string(c.Cert)},
		"private_key":       map[string]string{"inline_string": string(c.Key)},
	}})
	if err != nil {
		return nil, err
	}
	ca, err := sdsFile(map[string]any{"name": "lbplane_xds_ca", "validation_context": map[string]any{
		"trusted_ca": map[string]string{"inline_string": string(c.CA)},
	}})
	if err != nil {
		return nil, err
	}
	return []CredentialFile{
		{CAFile, c.CA, 0o644}, {CASDSFile, ca, 0o644},
		{CertFile, c.Cert, 0o644}, {KeyFile, c.Key, 0o600}, {ClientSDSFile, client, 0o600},
	}, nil
}

// sdsFile is a DiscoveryResponse holding one Secret, the format of an SDS path_config_source.
func sdsFile(secret map[string]any) ([]byte, error) {
	secret["@type"] = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	return json.MarshalIndent(map[string]any{"resources": []any{secret}}, "", "  ")
}
