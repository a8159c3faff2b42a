package pushapi_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/pushapi/pushapitest"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/internal/etcdtest"
)

// Two push APIs on one etcd store, neither told of the other's writes (no watch): a push planned on what
// one last read is planned again on what the store holds, so the conflict rules between policies hold
// across replicas as they do in one process.
func TestPushesOnTwoReplicasFollowOneSetOfRules(t *testing.T) {
	c := etcdtest.Start(t, 1)
	open := func(id string) *pushapi.Client {
		st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key, SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/rules/", Passive: true, Timeout: 5 * time.Second}, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		_, url, _ := pushapitest.StartOn(t, st, "secret", nil)
		return &pushapi.Client{BaseURL: url, Token: "secret"}
	}
	one, two := open("one"), open("two")
	ctx := context.Background()
	if _, err := one.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false); err != nil {
		t.Fatal(err)
	}
	// two has not seen a: its push of the same host and port is still refused, naming the conflict.
	_, err := two.Apply(ctx, []byte(doc("b", 80, "a.example.com")), false)
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(strings.Join(e.Errors, " "), "default/b") {
		t.Fatalf("a conflicting push on the other replica: %d %v", e.Status, e.Errors)
	}
	if _, err := two.Apply(ctx, []byte(doc("c", 80, "c.example.com")), false); err != nil {
		t.Fatal(err)
	}
	// one has not seen c: its next push is planned again and keeps both.
	res, err := one.Apply(ctx, []byte(doc("a", 80, "a.example.com,x.example.com")), false)
	if err != nil || res.Policies[0].Outcome != pushapi.Configured || res.Policies[0].Generation != 2 {
		t.Fatalf("a push on the replica that had not seen the other's: %+v %v", res, err)
	}
	for _, cl := range []*pushapi.Client{one, two} {
		ps, err := cl.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"a", "c"}) {
			t.Errorf("%s lists %v, want [a c]", cl.BaseURL, names)
		}
	}
}

// A replica that follows the store (as lbplane serve does: Sync on every change the watch reports) takes
// in the other replica's creates, updates and deletes, and its own pushes, from the watch's events alone:
// it never lists the store again, and it judges its pushes against what the other replica wrote.
func TestReplicaFollowsTheOtherFromTheWatch(t *testing.T) {
	c := etcdtest.Start(t, 1)
	open := func(id string) (*pushapi.Server, *pushapi.Client, *store.Etcd, *metrics.Metrics) {
		st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), CACert: c.TLS().CA, Cert: c.TLS().Cert, Key: c.TLS().Key, SecretKey: bytes.Repeat([]byte{7}, 32), Prefix: "/follow/", Timeout: 5 * time.Second, HealthInterval: 200 * time.Millisecond}, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		m := metrics.New(nil)
		st.Metrics = m
		srv, url, _ := pushapitest.StartOn(t, st, "secret", nil)
		return srv, &pushapi.Client{BaseURL: url, Token: "secret"}, st, m
	}
	oneSrv, one, oneSt, oneMetrics := open("one")
	_, two, _, _ := open("two")
	// The watch has started once its first signal came; what one Syncs from then on is covered by it.
	select {
	case <-oneSt.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signal at the watch's start")
	}
	if err := oneSrv.Sync(); err != nil {
		t.Fatal(err)
	}
	lists := storeOps(t, oneMetrics, "list")
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for {
			select {
			case <-ctx.Done():
				return
			case <-oneSt.Changes():
				if err := oneSrv.Sync(); err != nil {
					t.Errorf("sync: %v", err)
				}
			}
		}
	}()
	defer func() { cancel(); <-followed }()

	names := func(cl *pushapi.Client) map[string]int64 {
		ps, err := cl.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, p := range ps {
			out[p.Name] = p.Generation
		}
		return out
	}
	waitUntil := func(what string, want map[string]int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := names(one); !maps.Equal(got, want); got = names(one) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: one serves %v, want %v", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := two.Apply(ctx, []byte(doc("a", 80, "a.example.com")+"---\n"+doc("b", 80, "b.example.com")), false); err != nil {
		t.Fatal(err)
	}
	waitUntil("two's creates", map[string]int64{"a": 1, "b": 1})
	if _, err := two.Apply(ctx, []byte(doc("a", 80, "a.example.com,x.example.com")), false); err != nil {
		t.Fatal(err)
	}
	if err := two.Delete(ctx, "default", "b"); err != nil {
		t.Fatal(err)
	}
	waitUntil("two's update and delete", map[string]int64{"a": 2})
	// one judges against a's new hostname, and takes b's, freed by the delete.
	_, err := one.Apply(ctx, []byte(doc("c", 80, "x.example.com")), false)
	if e := apiErr(t, err); e.Status != http.StatusConflict || !strings.Contains(strings.Join(e.Errors, " "), "default/c") {
		t.Fatalf("a push conflicting with the other replica's update: %d %v", e.Status, e.Errors)
	}
	if _, err := one.Apply(ctx, []byte(doc("c", 80, "b.example.com")), false); err != nil {
		t.Fatalf("a push of the hostname the other replica's delete freed: %v", err)
	}
	// one's own write comes back through the watch too, and changes nothing.
	waitUntil("one's own push", map[string]int64{"a": 2, "c": 1})
	if _, err := two.Apply(ctx, []byte(doc("d", 81, "d.example.com")), false); err != nil {
		t.Fatalf("two, after one's push: %v", err)
	}
	waitUntil("two's create after one's push", map[string]int64{"a": 2, "c": 1, "d": 1})
	if got := storeOps(t, oneMetrics, "list"); got != lists {
		t.Errorf("one listed the store %v times while following it, want none", got-lists)
	}
}

// storeOps reads lbplane_store_operations_total{operation=op, result="ok"} from m; the replica has listed
// the store at least once (at its start), so the series is there.
func storeOps(t *testing.T, m *metrics.Metrics, op string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	want := fmt.Sprintf(`lbplane_store_operations_total{operation=%q,result="ok"} `, op)
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the metrics:\n%s", strings.TrimSpace(want), rec.Body.String())
	return 0
}

// conflicting is a store whose first writes meet a write of another replica, as a replica slower than the
// others does in a storm of pushes.
type conflicting struct {
	store.Store
	left int
}

func (c *conflicting) Apply(base int64, puts []*store.Record, deletes []objkey.Key) (int64, error) {
	if c.left > 0 {
		c.left--
		return 0, store.ErrConflict
	}
	return c.Store.Apply(base, puts, deletes)
}

// A push and a delete that lose many rounds to other replicas' writes are planned again until they win,
// as long as the others keep winning within the bound of time, not a count of rounds.
func TestWritesThatKeepMeetingOtherWritesAreRetried(t *testing.T) {
	bolt, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	st := &conflicting{Store: bolt, left: 30}
	_, url, _ := pushapitest.StartOn(t, st, "secret", nil)
	cl := &pushapi.Client{BaseURL: url, Token: "secret"}
	ctx := context.Background()
	if _, err := cl.Apply(ctx, []byte(doc("a", 80, "a.example.com")), false); err != nil {
		t.Fatalf("a push after 30 lost rounds: %v", err)
	}
	st.left = 30
	if err := cl.Delete(ctx, "default", "a"); err != nil {
		t.Fatalf("a delete after 30 lost rounds: %v", err)
	}
	if ps, err := cl.List(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("after the delete: %v %v", ps, err)
	}
}
