package lbplanecmd

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lbplane/lbplane/controlplane/serve"
	"github.com/lbplane/lbplane/controlplane/store"
)

func newStore() *cobra.Command {
	cmd := &cobra.Command{Use: "store", Short: "Work on lbplane's policy store offline"}
	cmd.AddCommand(newMigrate())
	return cmd
}

// migrateOpts are lbplane store migrate's flags.
type migrateOpts struct {
	from, to       string
	etcd           store.EtcdConfig
	secretKeyFile  string
	withoutSecrets bool
}

func newMigrate() *cobra.Command {
	var o migrateOpts
	cmd := &cobra.Command{
		Use:   "migrate --from SOURCE --to TARGET",
		Short: "Copy every policy and revocation (and the CA and tokens) from one store to an empty other",
		Long: `Copies every policy (its document byte for byte, generation, creation and update times and uid) and the
revoked Envoy identities from a data directory (bbolt) to etcd, or back. With --etcd-secret-key-file the
CA and push API tokens go too: sealed into etcd from <data-dir>/pki and the token files, or opened from
etcd into the data directory, so that Envoys and lbctl keep working across the move. Stop every lbplane
using the source first; the target must hold no policy.`,
		Example: `  lbplane store migrate --from /var/lib/lbplane --to etcd://127.0.0.1:2379/lbplane/ --etcd-secret-key-file /etc/lbplane/etcd-secret.key
  lbplane store migrate --from etcds://10.0.0.1:2379,10.0.0.2:2379/lbplane/ --to /var/lib/lbplane-restored \
      --etcd-cacert ca.crt --etcd-cert client.crt --etcd-key client.key --etcd-secret-key-file /etc/lbplane/etcd-secret.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMigrate(cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "source: a data directory, or etcd://HOST:PORT[,HOST:PORT]/PREFIX/ (etcds:// for TLS)")
	f.StringVar(&o.to, "to", "", "target, in the same forms; must hold no policy")
	f.StringVar(&o.etcd.CACert, "etcd-cacert", "", "PEM CA that verifies the etcd members")
	f.StringVar(&o.etcd.Cert, "etcd-cert", "", "PEM client certificate for etcd")
	f.StringVar(&o.etcd.Key, "etcd-key", "", "PEM key of --etcd-cert")
	f.StringVar(&o.secretKeyFile, "etcd-secret-key-file", "", "the key file lbplane serve --store etcd seals the CA and tokens with; needed to carry them")
	f.BoolVar(&o.withoutSecrets, "without-secrets", false, "carry only policies and revocations, not the CA and tokens (no --etcd-secret-key-file needed)")
	cmd.MarkFlagRequired("from")
	cmd.MarkFlagRequired("to")
	return cmd
}

// openFor opens one side of a migration: a data directory or etcd.
func openFor(flag, where string, o migrateOpts) (store.Store, *store.Etcd, string, error) {
	if strings.HasPrefix(where, "etcd://") || strings.HasPrefix(where, "etcds://") {
		eps, prefix, err := store.ParseEtcdURL(where)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %w", flag, err)
		}
		cfg := o.etcd
		cfg.Endpoints, cfg.Prefix, cfg.Passive = eps, prefix, true
		st, err := store.OpenEtcd(cfg, "lbplane-store-migrate")
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %w", flag, err)
		}
		return st, st, "", nil
	}
	if strings.Contains(where, "://") {
		return nil, nil, "", fmt.Errorf("%s %q: a data directory or etcd://HOST:PORT/PREFIX/", flag, where)
	}
	dir, err := filepath.Abs(where)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	st, err := store.Open(dir)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	return st, nil, dir, nil
}

func runMigrate(out io.Writer, o migrateOpts) error {
	var key []byte
	if !o.withoutSecrets {
		if o.secretKeyFile == "" {
			return errors.New("--etcd-secret-key-file: needed to carry the CA and tokens (or --without-secrets to leave them)")
		}
		var err error
		if key, err = store.ReadSecretKey(o.secretKeyFile); err != nil {
			return err
		}
	}
	from, fromEtcd, fromDir, err := openFor("--from", o.from, o)
	if err != nil {
		return err
	}
	defer from.Close()
	to, toEtcd, toDir, err := openFor("--to", o.to, o)
	if err != nil {
		return err
	}
	defer to.Close()
	if (fromEtcd == nil) == (toEtcd == nil) {
		return errors.New("--from and --to: one data directory and one etcd")
	}
	n, err := store.Copy(from, to)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "copied %d policies and the revocations from %s to %s\n", n, o.from, o.to)
	if key == nil {
		return nil
	}
	if toEtcd != nil {
		sec, err := serve.SecretsFromDir(fromDir)
		if err != nil {
			return err
		}
		if err := toEtcd.SealSecrets(key, sec); err != nil {
			return err
		}
		fmt.Fprintln(out, "sealed the CA and push API tokens into etcd")
		return nil
	}
	sec, err := fromEtcd.OpenSecrets(key)
	if err != nil {
		return err
	}
	if err := serve.WriteSecretsToDir(toDir, sec); err != nil {
		return err
	}
	fmt.Fprintln(out, "wrote the CA and push API tokens into", toDir)
	return nil
}
