package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/internal/etcdtest"
	"github.com/lbplane/lbplane/internal/kubetest"
)

// runnerTB lets the runner start the same etcd and kube-apiserver the tests use: kubetest reports failures
// through Fatal, which here ends startCluster with an error.
type runnerTB struct {
	dir      string
	cleanups []func()
	failed   bool
}

type fatal string

func (t *runnerTB) Helper() {}
func (t *runnerTB) Fatal(args ...any) {
	t.failed = true
	panic(fatal(fmt.Sprint(args...)))
}
func (t *runnerTB) Fatalf(format string, args ...any) {
	t.failed = true
	panic(fatal(fmt.Sprintf(format, args...)))
}
func (t *runnerTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *runnerTB) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "kube-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}
func (t *runnerTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *runnerTB) Failed() bool     { return t.failed }
func (t *runnerTB) close() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// startCluster runs etcd and kube-apiserver (installed by make tools) with lbplane's CRD.
func startCluster(dir string) (c *kubetest.Cluster, stop func(), err error) {
	err = withRunnerTB(dir, "starting kube-apiserver", func(t *runnerTB) error {
		c, stop = kubetest.Start(t), t.close
		return nil
	})
	return c, stop, err
}

// withRunnerTB runs start with a runnerTB in dir, turning its t.Fatal into an error that names what was
// being done; on any error what start had begun is stopped.
func withRunnerTB(dir, doing string, start func(t *runnerTB) error) (err error) {
	t := &runnerTB{dir: dir}
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			t.close()
			err = fmt.Errorf("%s: %s", doing, msg)
		}
	}()
	if err := start(t); err != nil {
		t.close()
		return err
	}
	return nil
}

// kubeApplier writes policies to the API server as kubectl apply does for a custom resource: a JSON merge
// patch of the whole object, or a create when it does not exist yet. Several at once, as many
// kubectl applies would.
func kubeApplier(c *kubetest.Cluster) applier {
	return func(ctx context.Context, docs []byte) error {
		var objs []*unstructured.Unstructured
		dec := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetNamespace("default")
			objs = append(objs, u)
		}
		work := make(chan *unstructured.Unstructured)
		errs := make(chan error, len(objs))
		var wg sync.WaitGroup
		for range min(16, len(objs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range work {
					errs <- applyOne(ctx, c.Client, u)
				}
			}()
		}
		for _, u := range objs {
			work <- u
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// applyOne creates u, or patches it when it exists: the fillers are new, and one request each halves a fill
// of 100,000 policies.
func applyOne(ctx context.Context, cl client.Client, u *unstructured.Unstructured) error {
	err := cl.Create(ctx, u.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return cl.Patch(ctx, u.DeepCopy(), client.RawPatch(types.MergePatchType, b))
}

// startEtcdStore runs a one-member etcd (the one the tests use) for the push rows with the etcd store, and
// returns lbplane serve's flags for it. A push of a thousand fillers is one transaction of 1,001 operations,
// about 1.5 MiB: etcd's limits are raised for it, as docs/ha.md tells operators to.
func startEtcdStore(dir string) (args []string, stop func(), err error) {
	err = withRunnerTB(dir, "starting etcd", func(t *runnerTB) error {
		c := etcdtest.StartWith(t, 1, "--max-txn-ops", "20000", "--max-request-bytes", "67108864")
		key := filepath.Join(dir, "etcd-secret.key")
		if err := os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
			return err
		}
		args, stop = append(c.Flags(), "--store", "etcd", "--etcd-secret-key-file", key), t.close
		return nil
	})
	return args, stop, err
}
