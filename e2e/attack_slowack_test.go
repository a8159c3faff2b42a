package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// A client of a group with a valid certificate that acknowledges every response late, but inside
// --ack-timeout (so it is never left out as unresponsive), paces nobody: the real Envoy of its group takes
// a change's make-before-break steps as it answers them itself, and the push's reply comes within
// --push-wait (default 2s), naming the slow node. (It used to pace every step of the group: a renamed
// backend reached the real Envoy only after the slow client had acknowledged the first step.)
func TestAttackSlowAckingClientDelaysNobody(t *testing.T) {
	t.Parallel()
	const (
		ackDelay = 8 * time.Second // under --ack-timeout below: the client always counts as responsive
		pushWait = 2 * time.Second // lbplane's default --push-wait
		margin   = 2 * time.Second // for a busy machine
	)
	l := startLbplane(t, "--ack-timeout", "10s")
	bs := startBackends(t, "s1", "s2", "s3")
	port := reservePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	startEnvoy(t, l, "real", true)
	doc := func(name string, b *Backend) []byte {
		return policy(t, renamedBackend, map[string]any{"Port": port, "Name": name, "B": b})
	}
	push(t, l, doc("one", bs[0]))
	waitServing(t, url, "s1")
	waitSynced(t, l, 1)

	// The slow client: a SotW ADS stream of clusters and listeners, every response acknowledged ackDelay
	// after it came.
	conn := xdsConn(t, l, issuedPair(t, l, "slow", "default"), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sendMu sync.Mutex
	send := func(r *discovery.DiscoveryRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(r)
	}
	for _, typ := range []string{resource.ClusterType, resource.ListenerType} {
		if err := send(&discovery.DiscoveryRequest{Node: &corev3.Node{Id: "slow", Cluster: "default"}, TypeUrl: typ}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for { // ends with the stream (cancel)
			r, err := s.Recv()
			if err != nil {
				return
			}
			ack := &discovery.DiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo}
			timer := time.AfterFunc(ackDelay, func() { send(ack) })
			context.AfterFunc(ctx, func() { timer.Stop() })
		}
	}()
	eventually(t, 3*ackDelay, "the slow client has acknowledged the first config", func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.NodeID == "slow" && p.State == xdsserver.Synced {
				return nil
			}
		}
		return fmt.Errorf("proxies: %v", nodesOf(ps))
	})

	// change pushes a renamed backend with lbctl push-config (a new cluster behind the route, the old one
	// removed: three steps) and returns how long the push's reply and the real Envoy took, and lbctl's
	// output.
	change := func(name string, b *Backend, args ...string) (reply, served time.Duration, out string) {
		t.Helper()
		start := time.Now()
		type result struct {
			out, errOut string
			err         error
			took        time.Duration
		}
		done := make(chan result, 1)
		go func() {
			out, errOut, err := lbctl(t, l, string(doc(name, b)), append([]string{"push-config", "-f", "-"}, args...)...)
			done <- result{out, errOut, err, time.Since(start)}
		}()
		deadline := time.Now().Add(3 * ackDelay)
		for served == 0 && time.Now().Before(deadline) {
			if got, err := requestVia(newClient(false), url, nil); err == nil && got == b.Name {
				served = time.Since(start)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		res := <-done
		if res.err != nil {
			t.Fatalf("push-config: %v\n%s", res.err, res.errOut)
		}
		if served == 0 {
			t.Fatalf("the real Envoy never served %s", b.Name)
		}
		return res.took, served, res.out
	}

	reply, served, out := change("two", bs[1])
	t.Logf("with a client acknowledging %v late: the push answered in %v, the real Envoy served the renamed backend after %v; lbctl said:\n%s",
		ackDelay, reply, served, out)
	if served > pushWait+margin {
		t.Errorf("the renamed backend reached the real Envoy after %v: the slow client paced it (bound %v)", served, pushWait)
	}
	if reply > pushWait+2*margin { // lbctl starts and connects first
		t.Errorf("the push's reply took %v, beyond --push-wait %v", reply, pushWait)
	}
	if !strings.Contains(out, "not yet acknowledged by 1 Envoy(s): slow") {
		t.Errorf("lbctl push-config did not name the slow node:\n%s", out)
	}

	// Another change while the slow client still sits on a step of the last one: the same, and the reply's
	// JSON names it.
	reply, served, out = change("three", bs[2], "-o", "json")
	var res struct {
		Lagging []string `json:"lagging"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("push-config -o json: %v\n%s", err, out)
	}
	t.Logf("second change: reply %v, served after %v, lagging %q", reply, served, res.Lagging)
	if !slices.Equal(res.Lagging, []string{"slow"}) {
		t.Errorf("the reply's lagging nodes are %q, want [slow]", res.Lagging)
	}
	if served > pushWait+margin || reply > pushWait+2*margin {
		t.Errorf("second change: reply %v, real Envoy %v; want them within %v and %v", reply, served, pushWait+2*margin, pushWait+margin)
	}

	// The control: with everyone answering at once, the reply names nobody.
	cancel()
	eventually(t, 30*time.Second, "the slow client is gone", func() error {
		ps, err := l.Client.Proxies(context.Background())
		if err != nil {
			return err
		}
		if len(ps) != 1 {
			return fmt.Errorf("proxies: %v", nodesOf(ps))
		}
		return nil
	})
	_, _, out = change("four", bs[0])
	if strings.Contains(out, "acknowledged") {
		t.Errorf("a push every Envoy acknowledged at once still names a node:\n%s", out)
	}
}
