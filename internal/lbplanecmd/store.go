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
	cmd.AddCommand(newMigrate(), newAuthenticate())
	return cmd
}

// migrateOpts are lbplane store migrate's flags.
type migrateOpts struct {
	from, to       string
	etcd           store.EtcdConfig
	secretKeyFile  string
	withoutSecrets bool
}

// etcdFlags adds the flags that say how to reach etcd, which both store commands take.
func etcdFlags(cmd *cobra.Command, o *migrateOpts) {
	f := cmd.Flags()
	f.StringVar(&o.etcd.CACert, "etcd-cacert", "", "PEM CA that verifies the etcd members")
	f.StringVar(&o.etcd.Cert, "etcd-cert", "", "PEM client certificate for etcd")
	f.StringVar(&o.etcd.Key, "etcd-key", "", "PEM key of --etcd-cert")
	f.StringVar(&o.secretKeyFile, "etcd-secret-key-file", "", "the key file of lbplane serve --store etcd: it authenticates every record lbplane writes in etcd and seals the CA and tokens")
	f.BoolVar(&o.etcd.Insecure, "insecure-etcd", false, "accept etcd reached in plaintext (etcd://), without a client certificate, or that answers clients presenting none")
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
	f.StringVar(&o.from, "from", "", "source: a data directory, or etcds://HOST:PORT[,HOST:PORT]/PREFIX/ (etcd:// without TLS)")
	f.StringVar(&o.to, "to", "", "target, in the same forms; must hold no policy")
	etcdFlags(cmd, &o)
	f.BoolVar(&o.withoutSecrets, "without-secrets", false, "carry only policies and revocations, not the CA and tokens")
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
		key, err := store.ReadSecretKey(o.secretKeyFile)
		if o.secretKeyFile == "" {
			err = errors.New("--etcd-secret-key-file: needed with etcd: every record lbplane writes there is authenticated with it")
		}
		if err != nil {
			return nil, nil, "", err
		}
		cfg := o.etcd
		cfg.Endpoints, cfg.Prefix, cfg.Passive, cfg.SecretKey = eps, prefix, true, key
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
	if !o.withoutSecrets && o.secretKeyFile != "" {
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

func newAuthenticate() *cobra.Command {
	var o migrateOpts
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "authenticate etcds://HOST:PORT[,HOST:PORT]/PREFIX/",
		Short: "Give lbplane's authentication to the records under an etcd prefix that an lbplane wrote without it",
		Long: `lbplane serve --store etcd serves only records that carry lbplane's authentication (a MAC made with a key
derived from --etcd-secret-key-file, bound to the record's key); records without it are refused. Records an
lbplane wrote before it authenticated its records carry none: stop every lbplane on the prefix, check what
--dry-run lists, then run this once to authenticate them, and start the replicas again.

Only what lbplane writes there is authenticated: policy records (of the policy their key names), the
revocations, the rollouts and the version key. Anything else under the prefix is listed and left alone, as
are records that already carry lbplane's authentication.`,
		Example: `  lbplane store authenticate etcds://lb1:2379,lb2:2379,lb3:2379/lbplane/ --etcd-cacert /etc/lbplane/etcd-ca.crt \
      --etcd-cert /etc/lbplane/etcd-client.crt --etcd-key /etc/lbplane/etcd-client.key \
      --etcd-secret-key-file /etc/lbplane/etcd-secret.key --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !strings.HasPrefix(args[0], "etcd://") && !strings.HasPrefix(args[0], "etcds://") {
				return fmt.Errorf("%q: want etcds://HOST:PORT[,HOST:PORT]/PREFIX/ (etcd:// without TLS)", args[0])
			}
			_, st, _, err := openFor("the store", args[0], o)
			if err != nil {
				return err
			}
			defer st.Close()
			sealed, left, err := st.Authenticate(dryRun)
			out := cmd.OutOrStdout()
			verb := "authenticated"
			if dryRun {
				verb = "would authenticate"
			}
			for _, k := range sealed {
				fmt.Fprintf(out, "%s %s\n", verb, k)
			}
			for _, k := range left {
				fmt.Fprintf(out, "left alone (not a record lbplane writes, or one its replicas write again) %s\n", k)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s %d records, left %d\n", verb, len(sealed), len(left))
			return nil
		},
	}
	etcdFlags(cmd, &o)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be authenticated, write nothing")
	return cmd
}
