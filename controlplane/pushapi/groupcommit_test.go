package pushapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/metrics"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// gated is a store whose next write waits until the test lets it through, and which lists the policies
// each write held.
type gated struct {
	store.Store
	mu      sync.Mutex
	writes  [][]string
	hold    chan struct{}
	entered chan struct{}
}

func (g *gated) Apply(base int64, puts []*store.Record, deletes []objkey.Key) (int64, error) {
	var keys []string
	for _, r := range puts {
		keys = append(keys, r.Key().String())
	}
	g.mu.Lock()
	g.writes = append(g.writes, keys)
	hold := g.hold
	g.hold = nil
	g.mu.Unlock()
	if hold != nil {
		g.entered <- struct{}{}
		<-hold
	}
	return g.Store.Apply(base, puts, deletes)
}

func (g *gated) written() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.writes)
}

func policyDoc(name string, port int, host string) []byte {
	return groupDoc(name, port, host, "default")
}

func groupDoc(name string, port int, host, group string) []byte {
	return fmt.Appendf(nil, `apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: %s}
spec:
  proxyGroup: %s
  listener: {port: %d, protocol: HTTP, hostnames: [%s]}
  backends: [{name: a, endpoints: [{address: 127.0.0.1, port: 8080}]}]
`, name, group, port, host)
}

type pushAnswer struct {
	res    *ApplyResult
	groups []string
	code   int
	errs   []string
}

// queuedBehind starts pushes one after the other while a first push is held in its store write, each
// once the one before it is queued, and returns their answers once the first write is let through.
func queuedBehind(t *testing.T, a *Admission, g *gated, bodies ...[]byte) []pushAnswer {
	t.Helper()
	g.mu.Lock()
	g.hold, g.entered = make(chan struct{}), make(chan struct{})
	hold := g.hold
	g.mu.Unlock()
	first := make(chan pushAnswer)
	go func() {
		res, groups, code, errs := a.apply(policyDoc("first", 9000+len(g.written()), "first.example.com"), false, "")
		first <- pushAnswer{res, groups, code, errs}
	}()
	<-g.entered
	answers := make([]pushAnswer, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, groups, code, errs := a.apply(b, false, "")
			answers[i] = pushAnswer{res, groups, code, errs}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			a.qmu.Lock()
			n := len(a.queue)
			a.qmu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("push %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(hold)
	if f := <-first; f.errs != nil {
		t.Fatalf("the first push: %d %v", f.code, f.errs)
	}
	wg.Wait()
	return answers
}

func newGatedAdmission(t *testing.T) (*Admission, *gated) {
	t.Helper()
	bolt, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	g := &gated{Store: bolt}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	eng := engine.New(cache, log)
	eng.Reach = reach.Loopback
	a := &Admission{Store: g, Engine: eng, Log: log, Metrics: metrics.New(nil), Versions: xdsserver.NewTracker(cache, log).Targets}
	if err := a.Load(); err != nil {
		t.Fatal(err)
	}
	return a, g
}

// Pushes that queue behind a write are written together, in one store transaction, and each is answered
// with its own policies.
func TestQueuedPushesAreWrittenTogether(t *testing.T) {
	a, g := newGatedAdmission(t)
	got := queuedBehind(t, a, g, policyDoc("b", 8001, "b.example.com"), policyDoc("c", 8002, "c.example.com"))
	for i, name := range []string{"b", "c"} {
		if got[i].errs != nil || len(got[i].res.Policies) != 1 || got[i].res.Policies[0].Name != name || got[i].res.Policies[0].Outcome != Created {
			t.Errorf("push of %s: %+v", name, got[i])
		}
	}
	if w := g.written(); !slices.EqualFunc(w, [][]string{{"default/first"}, {"default/b", "default/c"}}, slices.Equal) {
		t.Errorf("the store's writes: %v, want the queued pushes in one", w)
	}
	res, _ := a.Engine.Result()
	for _, k := range []string{"first", "b", "c"} {
		if pr := res.Policies.Of(objkey.Key{Namespace: "default", Name: k}); pr == nil || !pr.Accepted {
			t.Errorf("%s is not served: %+v", k, pr)
		}
	}
	rec := httptest.NewRecorder()
	a.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`lbplane_push_group_size_bucket{le="1"} 1`, `lbplane_push_group_size_bucket{le="2"} 2`, "lbplane_push_group_size_sum 3"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}

// Queued pushes refused together are each judged alone, in the order they came: the first to claim a
// host name has it, only the second is refused, and a third push beside them is not held up by it.
func TestQueuedPushesRefusedTogetherAreJudgedAlone(t *testing.T) {
	a, g := newGatedAdmission(t)
	got := queuedBehind(t, a, g, policyDoc("b", 8001, "x.example.com"), policyDoc("c", 8001, "x.example.com"), policyDoc("d", 8003, "d.example.com"))
	if got[0].errs != nil || got[0].res.Policies[0].Name != "b" {
		t.Errorf("the first to claim the host name: %+v", got[0])
	}
	if got[1].code != http.StatusConflict || len(got[1].errs) != 1 || !strings.Contains(got[1].errs[0], `is already served by policy default/b`) {
		t.Errorf("the second to claim it: %+v", got[1])
	}
	if got[2].errs != nil || got[2].res.Policies[0].Name != "d" {
		t.Errorf("a push beside them: %+v", got[2])
	}
	if w := g.written(); !slices.EqualFunc(w, [][]string{{"default/first"}, {"default/b"}, {"default/d"}}, slices.Equal) {
		t.Errorf("the store's writes: %v", w)
	}
}

// Two queued pushes of one policy are written one after the other, and the last one is kept.
func TestQueuedPushesOfOnePolicyAreWrittenInTurn(t *testing.T) {
	a, g := newGatedAdmission(t)
	got := queuedBehind(t, a, g, policyDoc("b", 8001, "b.example.com"), policyDoc("b", 8002, "b.example.com"))
	if got[0].errs != nil || got[0].res.Policies[0].Outcome != Created || got[1].errs != nil || got[1].res.Policies[0].Outcome != Configured {
		t.Errorf("the two pushes: %+v", got)
	}
	if w := g.written(); !slices.EqualFunc(w, [][]string{{"default/first"}, {"default/b"}, {"default/b"}}, slices.Equal) {
		t.Errorf("the store's writes: %v", w)
	}
	if p := a.sorted[slices.IndexFunc(a.sorted, func(p *v1alpha1.LoadBalancerPolicy) bool { return p.Name == "b" })]; p.Spec.Listener.Port != 8002 {
		t.Errorf("b holds port %d, want the last push's", p.Spec.Listener.Port)
	}
}

// Pushes written together are each answered with the proxy groups of their own policies, whose Envoys the
// answer waits for (--push-wait), not the groups the others changed.
func TestQueuedPushesNameTheirOwnGroups(t *testing.T) {
	a, g := newGatedAdmission(t)
	got := queuedBehind(t, a, g, groupDoc("b", 8001, "b.example.com", "east"), groupDoc("c", 8002, "c.example.com", "west"))
	if w := g.written(); len(w) != 2 {
		t.Fatalf("the store's writes: %v, want the queued pushes in one", w)
	}
	for i, want := range []string{"east", "west"} {
		if got[i].errs != nil || !slices.Equal(got[i].groups, []string{want}) {
			t.Errorf("push %d: groups %v (%v), want [%s]", i, got[i].groups, got[i].errs, want)
		}
	}
}
