package rollout

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/apiwire"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// memPersist is a store of rollouts with the shared stores' rule: a write over a version the writer did
// not read is refused.
type memPersist struct {
	vals map[string][]byte
	revs map[string]int // the store's version of each group
	read map[string]int // what the writer last read or wrote
}

func newMem() *memPersist {
	return &memPersist{vals: map[string][]byte{}, revs: map[string]int{}, read: map[string]int{}}
}

func (m *memPersist) Rollouts() (map[string][]byte, error) {
	out := map[string][]byte{}
	for g, v := range m.vals {
		out[g] = v
		m.read[g] = m.revs[g]
	}
	return out, nil
}

func (m *memPersist) PutRollout(group string, v []byte) error {
	if m.read[group] != m.revs[group] {
		return store.ErrConflict
	}
	m.revs[group]++
	m.read[group] = m.revs[group]
	if v == nil {
		delete(m.vals, group)
	} else {
		m.vals[group] = v
	}
	return nil
}

// otherWrites is a write by another replica.
func (m *memPersist) otherWrites(group string, v []byte) {
	m.revs[group]++
	m.vals[group] = v
}

func newController(p Persist, leader *bool) *Controller {
	eng := engine.New(xdscache.New(), slog.New(slog.DiscardHandler))
	return &Controller{Engine: eng, Persist: p, Log: slog.New(slog.DiscardHandler),
		Proxies: func() []xdsserver.ProxyStatus {
			return []xdsserver.ProxyStatus{proxy("envoy-b", "default"), proxy("envoy-a", "default")}
		},
		Leader: func() bool { return *leader }, LeaderWrites: true}
}

// proxy is an Envoy of group connected for an hour, with a stats port, that acknowledged its config.
func proxy(node, group string) xdsserver.ProxyStatus {
	return xdsserver.ProxyStatus{NodeID: node, Group: group, ConnectedAt: time.Now().Add(-time.Hour), StatsPort: 9901, Version: "v1",
		State: xdsserver.Synced, Authenticated: true}
}

var key = objkey.Key{Namespace: "default", Name: "shop"}

func change(gen int64) []Change {
	return []Change{{Key: key, Group: "default", New: &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", Generation: gen}}, Generation: gen}}
}

// A follower serves its own decision on a change, without storing it, until the leader's stored state
// covers it; the leader stores it; a follower that becomes the leader stores what it decided.
func TestFollowerHoldsItsDecisionUntilTheLeaderStoresIt(t *testing.T) {
	mem := newMem()
	leader := false
	c := newController(mem, &leader)
	if _, err := c.Begin(change(2)); err != nil {
		t.Fatal(err)
	}
	if len(mem.vals) != 0 {
		t.Fatalf("a follower stored %s", mem.vals["default"])
	}
	// Staged, with no canary until the leader chooses them (a random order: two replicas would choose
	// differently).
	st := c.Status(key)
	if st == nil || st.Phase != v1alpha1.RolloutProgressing || len(st.Canaries) != 0 || !strings.Contains(st.Message, "elected replica") {
		t.Fatalf("the follower's own decision: %+v", st)
	}
	// Nothing stored yet: the decision stands.
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 2 {
		t.Fatalf("after a reload of nothing: %+v", st)
	}
	// The leader stores an older rollout of the group (as an earlier version stored it: one rollout for
	// the group): the decision still stands.
	stored := func(gen int64, canary string) []byte {
		b, _ := json.Marshal(map[string]any{"group": "default", "policies": []PolicyRef{{Namespace: "default", Name: "shop", CandidateGeneration: gen}},
			"settings": *v1alpha1.RolloutDefaulted(nil), "phase": v1alpha1.RolloutProgressing, "stageStarted": time.Now(), "canaries": []string{canary}})
		return b
	}
	mem.otherWrites("default", stored(1, "envoy-b"))
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 2 || len(st.Canaries) != 0 {
		t.Fatalf("after the leader stored an older rollout: %+v", st)
	}
	// The leader's state covers the change: it is what is served.
	mem.otherWrites("default", stored(2, "envoy-b"))
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 2 || st.Canaries[0] != "envoy-b" {
		t.Fatalf("after the leader stored the rollout: %+v", st)
	}
	// A newer change, decided by this follower, then this replica leads: it stores its decision.
	if _, err := c.Begin(change(3)); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 3 {
		t.Fatalf("the follower's decision on generation 3: %+v", st)
	}
	leader = true
	c.step(time.Now())
	got, err := decodeGroup(mem.vals["default"])
	if err != nil || got.Policies[0].CandidateGeneration != 3 || len(got.Policies[0].Canaries) != 1 {
		t.Fatalf("stored after the takeover: %s (%v)", mem.vals["default"], err)
	}
}

// A write over a state another replica changed since is refused by the store; the state is read again and
// the change decided again on it.
func TestWriteOverAnotherReplicasStateIsDecidedAgain(t *testing.T) {
	mem := newMem()
	leader := true
	c := newController(mem, &leader)
	c.LeaderWrites = false // the etcd store: every replica writes
	if _, err := c.Begin(change(2)); err != nil {
		t.Fatal(err)
	}
	// Another replica pauses it.
	s, _ := decodeGroup(mem.vals["default"])
	s.Policies[0].Phase = v1alpha1.RolloutPaused
	b, _ := json.Marshal(s)
	mem.otherWrites("default", b)
	// This replica's abort is decided on the paused state, not written over it blindly.
	if err := c.Action(key, "abort"); err != nil {
		t.Fatal(err)
	}
	s, _ = decodeGroup(mem.vals["default"])
	if s.Policies[0].Phase != v1alpha1.RolloutAborted {
		t.Fatalf("stored phase %s", s.Policies[0].Phase)
	}
	// And a pause, on the state read again, is refused as the rollout is no longer progressing.
	mem.otherWrites("default", b)
	if err := c.Action(key, "pause"); err == nil {
		t.Fatal("a pause of a paused rollout (paused by another replica) was taken")
	}
}

// lbctl rollout undo reads a stored rollout's baselines with apiwire.RolloutBaselines, without linking this
// package: what is stored decodes into it, as the policy object the baseline was (its generation and spec).
func TestStoredStateCarriesTheBaselinesLbctlReads(t *testing.T) {
	mem := newMem()
	c := newController(mem, new(bool))
	c.LeaderWrites = false
	ch := change(7)
	ch[0].Old = &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", Generation: 6},
		Spec: v1alpha1.LoadBalancerPolicySpec{ProxyGroup: "edge"}}
	ch = append(ch, Change{Key: objkey.Key{Namespace: "default", Name: "new"}, Group: "default",
		New: &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new", Generation: 1}}, Generation: 1})
	if _, err := c.Begin(ch); err != nil {
		t.Fatal(err)
	}
	var bs apiwire.RolloutBaselines
	if err := json.Unmarshal(mem.vals["default"], &bs); err != nil {
		t.Fatal(err)
	}
	if len(bs.Policies) != 2 || bs.Policies[0].Name != "shop" || bs.Policies[0].Baseline == nil || bs.Policies[0].Baseline.Metadata.Generation != 6 ||
		bs.Policies[1].Name != "new" || bs.Policies[1].Baseline != nil {
		t.Fatalf("decoded %+v from %s", bs, mem.vals["default"])
	}
	var spec v1alpha1.LoadBalancerPolicySpec
	if err := json.Unmarshal(bs.Policies[0].Baseline.Spec, &spec); err != nil || spec.ProxyGroup != "edge" {
		t.Errorf("the baseline's spec %s: %+v, %v", bs.Policies[0].Baseline.Spec, spec, err)
	}
}

// A rollout stored by an earlier lbplane kept the store's record of each version (the document as pushed);
// it is read as the policy that document is, with the record's metadata, and written back as the policy.
// Its creation time survives to the nanosecond, as it decides conflicts.
func TestStoredRecordsOfAnEarlierVersionAreRead(t *testing.T) {
	created := time.Date(2026, 11, 1, 10, 0, 0, 123456789, time.UTC)
	doc := []byte(`{"apiVersion":"lbplane.io/v1alpha1","kind":"LoadBalancerPolicy","metadata":{"name":"shop","labels":{"team":"a"}},` +
		`"spec":{"proxyGroup":"edge","listener":{"port":10080,"protocol":"HTTP"},"backends":[{"name":"app","endpoints":[{"address":"127.0.0.1","port":8080}]}]}}`)
	old, err := json.Marshal(map[string]any{"namespace": "default", "name": "shop", "document": doc, "generation": 6,
		"created": created, "updated": created, "uid": "u-1"})
	if err != nil {
		t.Fatal(err)
	}
	var v Version
	if err := json.Unmarshal(old, &v); err != nil {
		t.Fatal(err)
	}
	p := v.Policy()
	if p.Namespace != "default" || p.Name != "shop" || p.Generation != 6 || string(p.UID) != "u-1" || !p.CreationTimestamp.Time.Equal(created) ||
		p.Labels["team"] != "a" || p.Spec.ProxyGroup != "edge" || len(p.Spec.Backends) != 1 {
		t.Fatalf("read %+v", p)
	}
	again, err := json.Marshal(&v)
	if err != nil {
		t.Fatal(err)
	}
	var back Version
	if err := json.Unmarshal(again, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Policy().Spec, p.Spec) || back.Generation != 6 || !back.CreationTimestamp.Time.Equal(created) ||
		back.Labels["team"] != "a" || back.APIVersion != v1alpha1.GroupVersion.String() || back.Kind != v1alpha1.Kind {
		t.Errorf("written as %s, read back as %+v", again, back.Policy())
	}
	if bytes.Contains(again, []byte(`"document"`)) {
		t.Errorf("written in the earlier form: %s", again)
	}
}

// A follower keeps its own decision (every Envoy on the baseline) for as long as the leader has not stored
// the change's rollout, as the leader holds a change it cannot stage: it never falls back to serving the
// change to every Envoy. A rollout the leader stored before this replica saw the change stands as stored.
func TestFollowerNeverServesAnUnstoredChangeToEveryEnvoy(t *testing.T) {
	mem := newMem()
	leader := false
	c := newController(mem, &leader)
	if _, err := c.Begin(change(2)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.byGroup["default"].localSince = time.Now().Add(-time.Hour)
	c.mu.Unlock()
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 2 || len(st.Canaries) != 0 {
		t.Fatalf("an hour later, with nothing stored: %+v", st)
	}
	if got := c.Engine.Splits(); len(got) != 1 {
		t.Fatalf("an hour later, with nothing stored, the group is not split: %v", got)
	}

	// The leader stores generation 3's rollout before this replica's source sees generation 3.
	b, _ := json.Marshal(&group{Group: "default", Version: stateVersion, Order: []string{"envoy-b", "envoy-a"}, Policies: []*policy{{
		PolicyRef: PolicyRef{Namespace: "default", Name: "shop", CandidateGeneration: 3}, Settings: *v1alpha1.RolloutDefaulted(nil),
		Phase: v1alpha1.RolloutProgressing, StageStarted: time.Now(), Canaries: []string{"envoy-b"}}}})
	mem.otherWrites("default", b)
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(change(3)); err != nil {
		t.Fatal(err)
	}
	if st := c.Status(key); st == nil || st.CandidateGeneration != 3 || len(st.Canaries) != 1 || st.Canaries[0] != "envoy-b" {
		t.Fatalf("the leader's rollout of generation 3, once this replica saw it: %+v", st)
	}
}
