package pushapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

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
		st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.Endpoints(), Prefix: "/rules/", Passive: true, Timeout: 5 * time.Second}, id)
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
