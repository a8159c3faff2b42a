package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Secrets are what every replica must hold the same so that any of them authenticates any Envoy and any
// lbctl: lbplane's CA and the push API tokens.
type Secrets struct {
	CACert        []byte `json:"caCert"`
	CAKey         []byte `json:"caKey"`
	Token         string `json:"token"`
	ReadOnlyToken string `json:"readOnlyToken"`
}

// ReadSecretKey reads the key that seals Secrets in etcd: a file of 64 hex digits (32 bytes, AES-256),
// readable by its owner only.
func ReadSecretKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--etcd-secret-key-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--etcd-secret-key-file: %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--etcd-secret-key-file: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, errors.New("--etcd-secret-key-file: want 64 hex digits (32 random bytes; e.g. openssl rand -hex 32)")
	}
	return key, nil
}

// seal encrypts v with AES-256-GCM under key, bound to the etcd key it is stored at (additional data), so
// a sealed value moved to another key does not open.
func seal(key []byte, at string, v []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, v, []byte(at)), nil
}

func open(key []byte, at string, sealed []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("too short")
	}
	return aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(at))
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// LoadOrCreateSecrets returns the secrets sealed in etcd. When there are none yet, the leader creates them
// (create) and stores them sealed; the other replicas wait for them until ctx ends. created is true on the
// replica that created them.
func (s *Etcd) LoadOrCreateSecrets(ctx context.Context, key []byte, create func() (*Secrets, error)) (sec *Secrets, created bool, err error) {
	at := s.prefix + etcdSecrets
	for {
		rctx, cancel := s.ctx()
		resp, err := s.Client.Get(rctx, at)
		cancel()
		if err != nil {
			return nil, false, s.unavailable(err)
		}
		if len(resp.Kvs) > 0 {
			plain, err := open(key, at, resp.Kvs[0].Value)
			if err != nil {
				s.refused.refuse(at, resp.Kvs[0].ModRevision, errors.New("the sealed CA and tokens do not open with --etcd-secret-key-file"))
				return nil, false, fmt.Errorf("the CA and tokens in etcd (%s) do not open with --etcd-secret-key-file: every replica needs the same key file", at)
			}
			sec := &Secrets{}
			if err := json.Unmarshal(plain, sec); err != nil {
				return nil, false, fmt.Errorf("%s: %w", at, err)
			}
			return sec, false, nil
		}
		if s.Leader() {
			sec, err := create()
			if err != nil {
				return nil, false, err
			}
			created, err := s.createSecrets(key, sec)
			if err != nil || created {
				return sec, created, err
			}
			continue // another replica was quicker: read its secrets
		}
		select {
		case <-ctx.Done():
			return nil, false, fmt.Errorf("waiting for the leader to create the CA and tokens in etcd: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createSecrets stores sec sealed, only while no secrets are stored; it reports whether it did.
func (s *Etcd) createSecrets(key []byte, sec *Secrets) (bool, error) {
	at := s.prefix + etcdSecrets
	plain, err := json.Marshal(sec)
	if err != nil {
		return false, err
	}
	sealed, err := seal(key, at, plain)
	if err != nil {
		return false, err
	}
	rctx, cancel := s.ctx()
	defer cancel()
	tr, err := s.Client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(at), "=", 0)).Then(clientv3.OpPut(at, string(sealed))).Commit()
	if err != nil {
		return false, s.unavailable(err)
	}
	return tr.Succeeded, nil
}
