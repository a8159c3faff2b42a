package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbplane/lbplane/bench/internal/gatewaybench"
	"github.com/lbplane/lbplane/controlplane/gatewayapi"
	"github.com/lbplane/lbplane/controlplane/kubesource"
	"github.com/lbplane/lbplane/controlplane/serve"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
	"github.com/lbplane/lbplane/internal/kubetest"
	"github.com/lbplane/lbplane/internal/portreserve"
)

// The Gateway API routes row (only with -only gateway-routes, not in make bench), in the manner of the public
// Gateway API comparisons (route propagation, traffic while routes change, resources at scale): lbplane in
// Kubernetes mode on a real kube-apiserver (with etcd) serving one Gateway through a real Envoy, HTTPRoutes
// to four Services whose endpoints are real backends in a network namespace of the row's own.
//
//  1. N routes attached (-gateway-routes); -gateway-routes-samples new routes, one at a time, each timed from
//     the create call's answer to its first 200 through Envoy, polled every -gateway-routes-poll.
//  2. A constant load (-gateway-routes-rate) over -gateway-routes-loaded of the N routes while other routes
//     are added, updated and deleted (-gateway-routes-changes a second, -gateway-routes-churn long); then
//     the same while the loaded routes themselves change (weights, Services, header filters). Every non-2xx,
//     connection error and answer from another route is counted.
//  3. A fresh lbplane and Envoy, M routes applied (-gateway-routes-memory): the time until the last is served
//     and until lbplane has settled, its CPU-seconds to get there, its RSS and the Envoy's.
var (
	gwRoutesN       = flag.Int("gateway-routes", 3000, "the Gateway API routes row (-only gateway-routes): HTTPRoutes attached to its Gateway while new routes are timed and while routes change under load")
	gwRoutesMemory  = flag.Int("gateway-routes-memory", 5000, "the gateway-routes row: HTTPRoutes applied to a fresh lbplane for its memory and CPU (0 leaves that phase out)")
	gwRoutesSamples = flag.Int("gateway-routes-samples", 50, "the gateway-routes row: new HTTPRoutes timed one at a time, from the create call's answer to the first 200 through Envoy")
	gwRoutesPoll    = flag.Duration("gateway-routes-poll", time.Millisecond, "the gateway-routes row: the interval of the requests that wait for a new route's first 200")
	gwRoutesChurn   = flag.Duration("gateway-routes-churn", 60*time.Second, "the gateway-routes row: the length of each phase of route changes under load (0 leaves them out)")
	gwRoutesChanges = flag.Int("gateway-routes-changes", 10, "the gateway-routes row: route changes a second under load")
	gwRoutesRate    = flag.Int("gateway-routes-rate", 200, "the gateway-routes row: requests a second of the constant load")
	gwRoutesLoaded  = flag.Int("gateway-routes-loaded", 20, "the gateway-routes row: routes the constant load is spread over")
)

const (
	gwNamespace   = "apps"
	gwSystem      = "lbplane-system"
	gwName        = "gw"
	gwDomain      = "routes.bench"
	gwServices    = 4 // Services svc-0 … svc-3
	gwEndpoints   = 2 // backends per Service, each an EndpointSlice of its own
	gwRouteHeader = "X-Route"
	// gwSampleLimit bounds the wait for one new route's first 200 (and for its status).
	gwSampleLimit = 30 * time.Second
	// gwApplyLimit bounds the waits for every route of a phase to be served and to have its status.
	gwApplyLimit = 15 * time.Minute
	// gwLoadWorkers are the load's requests in flight at most; as many more may wait for a worker, and a
	// request due when that queue is full is not sent and counted as late.
	gwLoadWorkers = 64
	// gwCreateWorkers write the routes of a phase at once, as several kubectl applies would.
	gwCreateWorkers = 16
)

// gatewayRoutesPlan is the row's settings and the machine's load around it (summary.json).
type gatewayRoutesPlan struct {
	Routes           int           `json:"routes"`
	MemoryRoutes     int           `json:"memoryRoutes"`
	Samples          int           `json:"samples"`
	Poll             time.Duration `json:"poll"`
	Churn            time.Duration `json:"churn"`
	ChangesPerSecond int           `json:"changesPerSecond"`
	Rate             int           `json:"rate"`
	Loaded           int           `json:"loadedRoutes"`
	Services         int           `json:"services"`
	Endpoints        int           `json:"endpointsPerService"`
	LoadBefore       string        `json:"loadAverageBefore"`
	LoadAfter        string        `json:"loadAverageAfter"`
}

func gatewayRoutesPlanFromFlags() gatewayRoutesPlan {
	return gatewayRoutesPlan{Routes: max(*gwRoutesN, 1), MemoryRoutes: max(*gwRoutesMemory, 0), Samples: max(*gwRoutesSamples, 0),
		Poll: max(*gwRoutesPoll, 100*time.Microsecond), Churn: max(*gwRoutesChurn, 0), ChangesPerSecond: max(*gwRoutesChanges, 1),
		Rate: max(*gwRoutesRate, 1), Loaded: max(min(*gwRoutesLoaded, *gwRoutesN), 1), Services: gwServices, Endpoints: gwEndpoints}
}

// gwRef is one backendRef: a Service and its weight.
type gwRef struct {
	svc    int
	weight int32
}

// gwRoute is one HTTPRoute of the row: one rule on one host name, a path prefix, a response header naming the
// route (so that a 200 tells which route answered), optionally a header match and a request header set.
type gwRoute struct {
	name, host, path string
	refs             []gwRef
	match            string // X-Variant must equal this; "" matches any request
	setHeader        string // RequestHeaderModifier sets X-Gen to this; "" none
}

func gwSharedHost(j int) string { return fmt.Sprintf("shared-%03d.%s", j, gwDomain) }

// gwSharedHosts is how many host names the routes that share one spread over: about fifteen routes each.
func gwSharedHosts(n int) int { return max(1, n/20) }

// gwFiller is the i-th of n attached routes. Every fourth has a host name of its own; the others share
// gwSharedHosts(n) names, about fifteen paths on each, as teams share a domain. Each goes to one of the
// Services, every fifth split evenly over two, every third sets a request header.
func gwFiller(i, n int) gwRoute {
	r := gwRoute{name: fmt.Sprintf("r-%05d", i), path: fmt.Sprintf("/r-%05d", i)}
	if i%4 == 0 {
		r.host = r.name + "." + gwDomain
	} else {
		r.host = gwSharedHost((i - i/4 - 1) % gwSharedHosts(n))
	}
	a := i % gwServices
	r.refs = []gwRef{{a, 1}}
	if i%5 == 0 {
		r.refs = append(r.refs, gwRef{(a + 1) % gwServices, 1})
	}
	if i%3 == 0 {
		r.setHeader = "f"
	}
	return r
}

// gwHostnames counts the distinct host names of routes 0 … n-1: one policy each in lbplane.
func gwHostnames(n int) int {
	own := (n + 3) / 4
	return own + min(gwSharedHosts(n), n-own)
}

// gwLoadedIndexes are the attached routes the load goes to, spread over all of them (own and shared host
// names alike).
func gwLoadedIndexes(n, k int) []int {
	k = max(1, min(k, n))
	out := make([]int, k)
	for j := range k {
		out[j] = j * n / k
	}
	return out
}

// gwUnderLoad is the gen-th change of a loaded route: weights move, the Service changes, a request header is
// set and removed; its host name, path and response header stay, so every request must still succeed.
func gwUnderLoad(r gwRoute, i, gen int) gwRoute {
	a := i % gwServices
	b, c := (a+1)%gwServices, (a+2)%gwServices
	r.setHeader = ""
	switch gen % 4 {
	case 1:
		r.refs = []gwRef{{a, 3}, {b, 1}}
	case 2:
		r.refs = []gwRef{{a, 1}, {b, 3}}
		r.setHeader = fmt.Sprintf("g%d", gen)
	case 3:
		r.refs = []gwRef{{c, 1}}
	default:
		r.refs = []gwRef{{a, 1}}
	}
	return r
}

func (r gwRoute) spec() gwv1.HTTPRouteSpec {
	match := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(r.path)}}
	if r.match != "" {
		match.Headers = []gwv1.HTTPHeaderMatch{{Name: "X-Variant", Value: r.match}}
	}
	filters := []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: gwRouteHeader, Value: r.name}}}}}
	if r.setHeader != "" {
		filters = append(filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Gen", Value: r.setHeader}}}})
	}
	var refs []gwv1.HTTPBackendRef
	for _, b := range r.refs {
		refs = append(refs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(fmt.Sprintf("svc-%d", b.svc)), Port: ptr.To(gwv1.PortNumber(80))},
			Weight:                 ptr.To(b.weight)}})
	}
	return gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwName}}},
		Hostnames:       []gwv1.Hostname{gwv1.Hostname(r.host)},
		Rules:           []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{match}, Filters: filters, BackendRefs: refs}},
	}
}

func (r gwRoute) object() *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: gwNamespace}, Spec: r.spec()}
}

// gwNetns is the network namespace the backends run in: an EndpointSlice refuses loopback addresses, and
// lbplane the host's own. One /30 of 198.18.0.0/24 (RFC 2544's benchmarking range), claimed by its name.
type gwNetns struct{ name, link, hostIP, ip string }

func newGWNetns() (*gwNetns, error) {
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		return nil, errors.New("the gateway-routes row runs its backends in a network namespace: it needs root and iproute2")
	}
	for n := range 64 {
		name := fmt.Sprintf("lbp-bgw%d", n)
		out, err := exec.Command("ip", "netns", "add", name).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "File exists") {
				continue
			}
			return nil, fmt.Errorf("ip netns add %s: %v %s", name, err, out)
		}
		h := &gwNetns{name: name, link: name, hostIP: fmt.Sprintf("198.18.0.%d", 4*n+1), ip: fmt.Sprintf("198.18.0.%d", 4*n+2)}
		peer := h.link + "p"
		for _, args := range [][]string{
			{"link", "add", h.link, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", name},
			{"addr", "add", h.hostIP + "/30", "dev", h.link},
			{"link", "set", h.link, "up"},
			{"netns", "exec", name, "ip", "addr", "add", h.ip + "/30", "dev", peer},
			{"netns", "exec", name, "ip", "link", "set", peer, "up"},
			{"netns", "exec", name, "ip", "link", "set", "lo", "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				h.remove()
				return nil, fmt.Errorf("ip %s: %v %s", strings.Join(args, " "), err, out)
			}
		}
		return h, nil
	}
	return nil, errors.New("every network namespace lbp-bgw0 … lbp-bgw63 exists: other runs hold them, or left them (ip netns del)")
}

func (h *gwNetns) remove() {
	exec.Command("ip", "link", "del", h.link).Run()
	exec.Command("ip", "netns", "del", h.name).Run()
}

// gwBackends starts one lbplane-backend process in the namespace serving every Service's endpoints, each on a
// port the kernel picks, and returns the ports by name (svc-S-a, svc-S-b, …) as its log tells them.
func gwBackends(e *env, dir string, ns *gwNetns) (*proc, map[string]int, error) {
	var addrs, names []string
	for s := range gwServices {
		for k := range gwEndpoints {
			addrs = append(addrs, ns.ip+":0")
			names = append(names, fmt.Sprintf("svc-%d-%c", s, 'a'+k))
		}
	}
	p, err := start(dir, "backends", nil, "ip", "netns", "exec", ns.name, filepath.Join(e.bin, "lbplane-backend"),
		"--listen", strings.Join(addrs, ","), "--name", strings.Join(names, ","))
	if err != nil {
		return nil, nil, err
	}
	ports := map[string]int{}
	ok := waitFor(10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "backends.log"))
		for _, l := range strings.Split(string(b), "\n") {
			// "serving NAME on ADDR"
			if f := strings.Fields(l); len(f) == 4 && f[0] == "serving" && f[2] == "on" {
				if _, port, err := net.SplitHostPort(f[3]); err == nil {
					ports[f[1]], _ = strconv.Atoi(port)
				}
			}
		}
		if len(ports) == len(names) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
		return false
	})
	if !ok {
		p.stop()
		return nil, nil, fmt.Errorf("the backends in %s did not say where they listen within 10 s (see %s)", ns.name, filepath.Join(dir, "backends.log"))
	}
	for _, name := range names {
		if err := waitPort(net.JoinHostPort(ns.ip, strconv.Itoa(ports[name])), 10*time.Second); err != nil {
			p.stop()
			return nil, nil, err
		}
	}
	return p, ports, nil
}

// gwBench is one run of the row: the cluster, the Gateway's Envoy port, lbplane and its Envoy.
type gwBench struct {
	e       *env
	cl      client.Client // 2,000 requests a second before client-side throttling: the row's writes are timed
	watch   client.WithWatch
	port    int          // the Envoy port of the Gateway's listener
	probe   *http.Client // one connection, for the first-200 polls
	lb      *proc
	envoy   *proc
	metrics int // lbplane's metrics (pprof) port
	kube    string
}

// start runs lbplane in Kubernetes mode with the Gateway API on, every address on port 0 (read back
// from ports.json), and an Envoy of the default group on it.
func (g *gwBench) start(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	args := serveArgs(data, "127.0.0.1:0", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0", "--pprof",
		"--kubernetes", "--kubeconfig", g.kube, "--gateway-api", "--gateway-api-address", "127.0.0.1",
		"--gateway-api-ports", strconv.Itoa(g.port), "--namespace", gwSystem, "--gateway-api-envoy-selector", "app=envoy")
	lb, err := start(dir, "lbplane", nil, filepath.Join(g.e.bin, "lbplane"), args...)
	if err != nil {
		return err
	}
	var ports serve.Ports
	if !waitFor(time.Minute, func() bool {
		select {
		case <-lb.done:
			return true
		default:
		}
		p, err := serve.ReadPorts(data)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			return false
		}
		ports = p
		return true
	}) || ports.XDS == "" {
		lb.stop()
		return fmt.Errorf("lbplane did not write its ports within a minute (see %s)", filepath.Join(dir, "lbplane.log"))
	}
	_, mp, _ := net.SplitHostPort(ports.Metrics)
	g.metrics, _ = strconv.Atoi(mp)
	envoy, err := startEnvoy(g.e, dir, envoybootstrap.Params{NodeID: "bench-gateway", XDS: ports.XDS, Delta: true,
		AdminSocket: filepath.Join(dir, "admin.sock"), MaxConnections: 10000})
	if err != nil {
		lb.stop()
		return err
	}
	g.lb, g.envoy = lb, envoy
	return nil
}

func (g *gwBench) stop() {
	g.envoy.stop()
	g.lb.stop()
	g.lb, g.envoy = nil, nil
}

// get sends GET path with Host host to the Gateway's Envoy port and returns the status and the route that
// answered (X-Route).
func (g *gwBench) get(c *http.Client, host, path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", g.port, path), nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(gwRouteHeader), nil
}

// served waits until r answers 200 through Envoy, asking every interval (one request at a time, at most
// limit/every+1 of them); it returns when the 200 came and how many requests it took.
func (g *gwBench) served(ctx context.Context, r gwRoute, every, limit time.Duration) (time.Time, int, bool) {
	deadline := time.Now().Add(limit)
	most := int(limit/every) + 1
	path := r.path + "/x"
	for polls := 1; polls <= most && ctx.Err() == nil; polls++ {
		t := time.Now()
		code, route, err := g.get(g.probe, r.host, path)
		if err == nil && code == http.StatusOK && route == r.name {
			return time.Now(), polls, true
		}
		if !time.Now().Before(deadline) {
			return time.Time{}, polls, false
		}
		if d := every - time.Since(t); d > 0 {
			time.Sleep(d)
		}
	}
	return time.Time{}, most, false
}

// accepted tells whether lbplane accepted the route's current generation on the Gateway (status.parents).
func accepted(rt *gwv1.HTTPRoute) bool {
	for _, p := range rt.Status.Parents {
		if p.ControllerName != gatewayapi.ControllerName {
			continue
		}
		for _, c := range p.Conditions {
			if c.Type == string(gwv1.RouteConditionAccepted) && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rt.Generation {
				return true
			}
		}
	}
	return false
}

// acceptedAt waits until the route's status says lbplane accepted it, reading it every 5 ms.
func (g *gwBench) acceptedAt(ctx context.Context, name string, limit time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rt := &gwv1.HTTPRoute{}
		if err := g.cl.Get(ctx, types.NamespacedName{Namespace: gwNamespace, Name: name}, rt); err == nil && accepted(rt) {
			return time.Now(), true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, false
}

// allAccepted waits until every route named in want has lbplane's Accepted status, from a watch of the
// routes (its first events are every route as it is); it returns how many have it and when the last of them
// was seen to get it.
func (g *gwBench) allAccepted(ctx context.Context, want map[string]bool, limit time.Duration) (int, time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	acc := map[string]bool{}
	var last time.Time
	for ctx.Err() == nil {
		w, err := g.watch.Watch(ctx, &gwv1.HTTPRouteList{}, client.InNamespace(gwNamespace))
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			rt, ok := ev.Object.(*gwv1.HTTPRoute)
			if !ok || !want[rt.Name] {
				continue
			}
			switch {
			case ev.Type != watch.Deleted && accepted(rt):
				if !acc[rt.Name] {
					acc[rt.Name], last = true, time.Now()
				}
			default:
				delete(acc, rt.Name)
			}
			if len(acc) == len(want) {
				w.Stop()
				return len(acc), last, true
			}
		}
		w.Stop()
	}
	return len(acc), last, false
}

// apply creates routes with gwCreateWorkers writers and returns when every create was answered.
func (g *gwBench) apply(ctx context.Context, routes []gwRoute) error {
	work := make(chan gwRoute)
	errs := make(chan error, gwCreateWorkers)
	var wg sync.WaitGroup
	for range gwCreateWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for r := range work {
				if err := g.cl.Create(ctx, r.object()); err != nil && first == nil {
					first = fmt.Errorf("creating HTTPRoute %s: %w", r.name, err)
				}
			}
			errs <- first
		}()
	}
	for _, r := range routes {
		select {
		case work <- r:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// allServed checks that every route answers 200 through Envoy, waiting for each within what is left of
// limit; it returns how many did.
func (g *gwBench) allServed(ctx context.Context, routes []gwRoute, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	n := 0
	for _, r := range routes {
		if _, _, ok := g.served(ctx, r, 5*time.Millisecond, max(time.Until(deadline), time.Millisecond)); ok {
			n++
		}
	}
	return n
}

// quiet waits until lbplane has used under a tenth of a core over two windows of 200 ms in a row (at most
// 5 s): a status write or the Gateway's status, which follow a new route, are done before the next sample.
func quiet(pid int) {
	prev := treeUsage(pid).CPUSeconds
	calm := 0
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && calm < 2; {
		time.Sleep(200 * time.Millisecond)
		now := treeUsage(pid).CPUSeconds
		if calm++; now-prev >= 0.02 {
			calm = 0
		}
		prev = now
	}
}

// gwProfileSeconds is the length of lbplane's CPU profile over the propagation samples.
const gwProfileSeconds = 30

// gatewayRoutesRow runs the row and records its runs.
func gatewayRoutesRow(ctx context.Context, e *env, out string, rep *report, record func(runRecord)) error {
	plan := gatewayRoutesPlanFromFlags()
	plan.LoadBefore = loadAverage()
	rep.GatewayRoutes = &plan
	writeUptime(filepath.Join(out, "uptime-before.txt"))
	defer func() {
		plan.LoadAfter = loadAverage()
		writeUptime(filepath.Join(out, "uptime-after.txt"))
	}()
	dir := filepath.Join(e.dir, "gateway-routes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ns, err := newGWNetns()
	if err != nil {
		return err
	}
	defer ns.remove()
	backends, ports, err := gwBackends(e, dir, ns)
	if err != nil {
		return err
	}
	defer backends.stop()

	var cluster *kubetest.Cluster
	var gwPort int
	var stopCluster func()
	if err := withRunnerTB(dir, "starting kube-apiserver", func(t *runnerTB) error {
		cluster = kubetest.Start(t)
		cluster.InstallCRDs(t, "charts/lbplane/crds/gateway-api")
		// The Gateway listener's Envoy port, reserved until the row ends: Envoy binds it with SO_REUSEPORT.
		gwPort = portreserve.Reserve(t)
		stopCluster = t.close
		return nil
	}); err != nil {
		return err
	}
	defer stopCluster()
	rc := rest.CopyConfig(cluster.Config)
	rc.QPS, rc.Burst = 2000, 4000
	cl, err := client.New(rc, client.Options{Scheme: kubesource.Scheme()})
	if err != nil {
		return err
	}
	wc, err := client.NewWithWatch(rc, client.Options{Scheme: kubesource.Scheme()})
	if err != nil {
		return err
	}
	g := &gwBench{e: e, cl: cl, watch: wc, port: gwPort, kube: cluster.Kubeconfig,
		probe: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true}}}
	if err := gwObjects(ctx, cl, ns.ip, ports); err != nil {
		return err
	}
	if err := g.start(filepath.Join(dir, "attached")); err != nil {
		return err
	}
	defer func() {
		if g.lb != nil {
			g.stop()
		}
	}()

	// Phase 1: N routes attached, then new routes one at a time.
	n := plan.Routes
	fillers := make([]gwRoute, n)
	want := map[string]bool{}
	for i := range n {
		fillers[i] = gwFiller(i, n)
		want[fillers[i].name] = true
	}
	begin := time.Now()
	if err := g.apply(ctx, fillers); err != nil {
		return err
	}
	created := time.Since(begin)
	if got := g.allServed(ctx, fillers, gwApplyLimit); got != n {
		return fmt.Errorf("gateway routes: %d of %d routes served through Envoy within %s", got, n, gwApplyLimit)
	}
	served := time.Since(begin)
	if got, _, ok := g.allAccepted(ctx, want, gwApplyLimit); !ok {
		return fmt.Errorf("gateway routes: %d of %d routes have lbplane's Accepted status after %s", got, n, gwApplyLimit)
	}
	waitSettled([]int{g.lb.cmd.Process.Pid})
	at := treeUsage(g.lb.cmd.Process.Pid)
	envoyAt := treeUsage(g.envoy.cmd.Process.Pid)
	fmt.Fprintf(os.Stderr, "gateway routes: %d HTTPRoutes on %d host names created in %.1f s, all served through Envoy after %.1f s and accepted after %.1f s; lbplane RSS %d MiB, Envoy %d MiB\n",
		n, gwHostnames(n), created.Seconds(), served.Seconds(), time.Since(begin).Seconds(), at.RSSBytes>>20, envoyAt.RSSBytes>>20)
	if err := g.propagation(ctx, plan, at, envoyAt, out, record); err != nil {
		return err
	}
	if plan.Churn > 0 {
		if err := g.churn(ctx, plan, fillers, out, record); err != nil {
			return err
		}
	}
	if plan.MemoryRoutes > 0 {
		g.stop()
		if err := cl.DeleteAllOf(ctx, &gwv1.HTTPRoute{}, client.InNamespace(gwNamespace)); err != nil {
			return fmt.Errorf("deleting the routes: %w", err)
		}
		if !waitFor(5*time.Minute, func() bool {
			var list gwv1.HTTPRouteList
			err := cl.List(ctx, &list, client.InNamespace(gwNamespace))
			if err == nil && len(list.Items) == 0 {
				return true
			}
			time.Sleep(200 * time.Millisecond)
			return false
		}) {
			return errors.New("gateway routes: the routes were not all deleted within 5 minutes")
		}
		if err := g.start(filepath.Join(dir, "memory")); err != nil {
			return err
		}
		if err := g.memory(ctx, plan, out, record); err != nil {
			return err
		}
	}
	return nil
}

func writeUptime(path string) {
	b, err := exec.Command("uptime").CombinedOutput()
	if err != nil {
		b = fmt.Appendf(nil, "uptime: %v\n/proc/loadavg: %s\n", err, loadAverage())
	}
	os.WriteFile(path, b, 0o644)
}

// gwObjects writes the namespaces, the GatewayClass and Gateway, and the Services with an EndpointSlice per
// backend.
func gwObjects(ctx context.Context, cl client.Client, ip string, ports map[string]int) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwSystem}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwNamespace}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "lbplane"}, Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.ControllerName}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: gwName, Namespace: gwNamespace}, Spec: gwv1.GatewaySpec{GatewayClassName: "lbplane",
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}},
	}
	for s := range gwServices {
		name := fmt.Sprintf("svc-%d", s)
		objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gwNamespace},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}})
		for k := range gwEndpoints {
			b := fmt.Sprintf("%s-%c", name, 'a'+k)
			objs = append(objs, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: b, Namespace: gwNamespace, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(ports[b])), Protocol: ptr.To(corev1.ProtocolTCP)}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			})
		}
	}
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// propagation times new routes one at a time among the N attached: from the create call's answer (and from
// the call sent) to the first 200 through Envoy, and to lbplane's Accepted status. Even samples get a host
// name of their own (a new policy in lbplane), odd ones a path on a shared host name (a policy changed).
// Before each, lbplane is quiet; after all, the new routes are deleted again.
func (g *gwBench) propagation(ctx context.Context, plan gatewayRoutesPlan, at, envoyAt usage, out string, record func(runRecord)) error {
	pid := g.lb.cmd.Process.Pid
	// lbplane's CPU profile over the first samples, beside the results: what a new route costs it.
	profiled := make(chan string, 1)
	go func() {
		profiled <- profile(g.metrics, gwProfileSeconds, out, fmt.Sprintf("gateway-routes-%d-cpu", plan.Routes))
	}()
	defer func() {
		select {
		case top := <-profiled:
			fmt.Fprintf(os.Stderr, "gateway routes: lbplane's CPU profile over the first new routes:\n%s\n", top)
		case <-ctx.Done():
		}
	}()
	var samples, pushes, own, shared, statuses []float64
	var polls, missed, statusMissed, apiErrors int
	var polled time.Duration // from the create's answer to the 200, over the samples: polled/polls is the poll gap
	var cpu float64
	var lastErr error
	var made []gwRoute
	for s := range plan.Samples {
		if ctx.Err() != nil {
			break
		}
		r := gwRoute{name: fmt.Sprintf("new-%03d", s), path: fmt.Sprintf("/new-%03d", s), refs: []gwRef{{s % gwServices, 1}}}
		if s%2 == 0 {
			r.host = r.name + "." + gwDomain
		} else {
			r.host = gwSharedHost(s % gwSharedHosts(plan.Routes))
		}
		quiet(pid)
		u0 := treeUsage(pid)
		t0 := time.Now()
		if err := g.cl.Create(ctx, r.object()); err != nil {
			apiErrors++
			lastErr = err
			continue
		}
		t1 := time.Now()
		made = append(made, r)
		got, n, ok := g.served(ctx, r, plan.Poll, gwSampleLimit)
		if !ok {
			missed++
			continue
		}
		polls += n
		polled += got.Sub(t1)
		ms := float64(got.Sub(t1).Microseconds()) / 1000
		samples, pushes = append(samples, ms), append(pushes, float64(got.Sub(t0).Microseconds())/1000)
		if s%2 == 0 {
			own = append(own, ms)
		} else {
			shared = append(shared, ms)
		}
		if acc, ok := g.acceptedAt(ctx, r.name, gwSampleLimit); ok {
			statuses = append(statuses, float64(acc.Sub(t1).Microseconds())/1000)
		} else {
			statusMissed++
		}
		quiet(pid)
		cpu += treeUsage(pid).CPUSeconds - u0.CPUSeconds
	}
	note := ""
	switch {
	case missed > 0:
		note = fmt.Sprintf("%d new routes not served within %s", missed, gwSampleLimit)
	case apiErrors > 0:
		note = fmt.Sprintf("%d creates failed, the last: %v", apiErrors, lastErr)
	case statusMissed > 0:
		note = fmt.Sprintf("%d new routes without lbplane's Accepted status within %s", statusMissed, gwSampleLimit)
	case len(samples) < plan.Samples:
		note = "interrupted"
	}
	rec := runRecord{Scenario: gatewaybench.Scenario, Peer: "lbplane", Variant: gatewaybench.Propagation, API: "delta", Policies: plan.Routes,
		Samples: samples, PushSamples: pushes, Valid: note == "", Note: note,
		P50: percentile(samples, 50), P90: percentile(samples, 90), P99: percentile(samples, 99), P999: percentile(samples, 100),
		LbplaneRSS: at.RSSBytes, LbplaneCPUPerChangeMs: cpu * 1000 / float64(max(len(samples), 1)),
		Extra: map[string]float64{"hostnames": float64(gwHostnames(plan.Routes)), "samplesWanted": float64(plan.Samples),
			"pollIntervalMs": float64(plan.Poll.Microseconds()) / 1000, "pollsPerSample": float64(polls) / float64(max(len(samples), 1)),
			"meanPollGapMs": float64(polled.Microseconds()) / 1000 / float64(max(polls, 1)),
			"ownHostP50Ms":  percentile(own, 50), "ownHostP99Ms": percentile(own, 99), "sharedHostP50Ms": percentile(shared, 50), "sharedHostP99Ms": percentile(shared, 99),
			"statusP50Ms": percentile(statuses, 50), "statusP99Ms": percentile(statuses, 99), "missed": float64(missed), "apiErrors": float64(apiErrors),
			"envoyRSS": float64(envoyAt.RSSBytes)}}
	record(rec)
	fmt.Fprintf(os.Stderr, "gateway routes: %d new routes among %d: create answered → first 200 p50 %.1f ms p90 %.1f p99 %.1f max %.1f (own host name p99 %.1f, shared p99 %.1f); status Accepted p99 %.1f ms; lbplane %.1f ms CPU per route %s\n",
		len(samples), plan.Routes, rec.P50, rec.P90, rec.P99, rec.P999, rec.Extra["ownHostP99Ms"], rec.Extra["sharedHostP99Ms"], rec.Extra["statusP99Ms"], rec.LbplaneCPUPerChangeMs, note)
	// The timed routes leave again, so that the churn runs on the N routes.
	for _, r := range made {
		if err := g.cl.Delete(ctx, r.object()); err != nil {
			return fmt.Errorf("deleting HTTPRoute %s: %w", r.name, err)
		}
	}
	waitSettled([]int{pid})
	return nil
}

// loadTarget is a route the load goes to.
type loadTarget struct{ name, host, path string }

// loadResult counts the load's requests: every one not 2xx, every connection error and every answer from
// another route (X-Route) is a failure.
type loadResult struct {
	sent, ok, non2xx, connErrs, wrong, late int64
	lat                                     []float64 // ms
	seconds                                 float64
	failures                                []string // the first ones, for the log
}

// runLoad sends rate requests a second over targets for d, round robin, from gwLoadWorkers workers on
// keep-alive connections; a request due when every worker is busy and as many wait is not sent (late).
func (g *gwBench) runLoad(ctx context.Context, targets []loadTarget, rate int, d time.Duration) *loadResult {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: gwLoadWorkers, DisableCompression: true}}
	defer c.CloseIdleConnections()
	total := int(float64(rate) * d.Seconds())
	res := &loadResult{lat: make([]float64, 0, total)}
	var mu sync.Mutex
	begin := time.Now()
	work := make(chan int, gwLoadWorkers)
	var wg sync.WaitGroup
	for range gwLoadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				t := targets[k%len(targets)]
				start := time.Now()
				code, route, err := g.get(c, t.host, t.path+"/load")
				ms := float64(time.Since(start).Microseconds()) / 1000
				mu.Lock()
				res.sent++
				res.lat = append(res.lat, ms)
				fail := ""
				switch {
				case err != nil:
					res.connErrs++
					fail = err.Error()
				case code < 200 || code > 299:
					res.non2xx++
					fail = fmt.Sprintf("status %d", code)
				case route != t.name:
					res.wrong++
					fail = fmt.Sprintf("answered by route %q", route)
				default:
					res.ok++
				}
				if fail != "" && len(res.failures) < 20 {
					res.failures = append(res.failures, fmt.Sprintf("%.3f s %s%s: %s", start.Sub(begin).Seconds(), t.host, t.path, fail))
				}
				mu.Unlock()
			}
		}()
	}
	interval := time.Second / time.Duration(rate)
	for k := 0; k < total && ctx.Err() == nil; k++ {
		if w := time.Until(begin.Add(time.Duration(k) * interval)); w > 0 {
			time.Sleep(w)
		}
		select {
		case work <- k:
		default:
			mu.Lock()
			res.late++
			mu.Unlock()
		}
	}
	close(work)
	wg.Wait()
	res.seconds = time.Since(begin).Seconds()
	return res
}

// churnCounts are the route changes of a phase.
type churnCounts struct {
	added, updated, deleted, apiErrors int
	lastErr                            error
	seconds                            float64
}

func (c *churnCounts) count(err error, n *int) {
	if err != nil {
		c.apiErrors++
		c.lastErr = err
		return
	}
	*n++
}

// patchSpec replaces a route's spec (a JSON merge patch, as kubectl apply of the whole object does), with
// no resourceVersion: lbplane's status writes do not conflict with it.
func (g *gwBench) patchSpec(ctx context.Context, r gwRoute) error {
	b, err := json.Marshal(map[string]any{"spec": r.spec()})
	if err != nil {
		return err
	}
	return g.cl.Patch(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: gwNamespace}}, client.RawPatch(types.MergePatchType, b))
}

// paced calls change(k) rate times a second for d, one after another (a slow call delays the next ones).
func paced(ctx context.Context, rate int, d time.Duration, change func(k int)) float64 {
	begin := time.Now()
	interval := time.Second / time.Duration(rate)
	for k := 0; time.Since(begin) < d && ctx.Err() == nil; k++ {
		if w := time.Until(begin.Add(time.Duration(k) * interval)); w > 0 {
			time.Sleep(w)
		}
		if time.Since(begin) >= d {
			break
		}
		change(k)
	}
	return time.Since(begin).Seconds()
}

// churn runs the two phases of route changes under a constant load: other routes added, updated and
// deleted (among them routes on the loaded routes' host names), then the loaded routes themselves updated.
// The load starts a second before the changes and ends a second after them.
func (g *gwBench) churn(ctx context.Context, plan gatewayRoutesPlan, fillers []gwRoute, out string, record func(runRecord)) error {
	pid := g.lb.cmd.Process.Pid
	loaded := gwLoadedIndexes(len(fillers), plan.Loaded)
	isLoaded := map[int]bool{}
	var targets []loadTarget
	loadedHosts := map[string]bool{}
	var sharedLoadedHosts []string
	for _, i := range loaded {
		isLoaded[i] = true
		r := fillers[i]
		targets = append(targets, loadTarget{r.name, r.host, r.path})
		if !loadedHosts[r.host] && i%4 != 0 {
			sharedLoadedHosts = append(sharedLoadedHosts, r.host)
		}
		loadedHosts[r.host] = true
	}
	// The attached routes changed around the load: those beside a loaded route on its host name first.
	var neighbours []int
	for i := range fillers {
		if !isLoaded[i] && loadedHosts[fillers[i].host] {
			neighbours = append(neighbours, i)
		}
	}
	for i := range fillers {
		if !isLoaded[i] && !loadedHosts[fillers[i].host] {
			neighbours = append(neighbours, i)
		}
	}
	if len(sharedLoadedHosts) == 0 {
		sharedLoadedHosts = []string{gwSharedHost(0)}
	}

	phase := func(variant string, change func(k int, c *churnCounts)) error {
		waitSettled([]int{pid})
		u0 := treeUsage(pid)
		var res *loadResult
		done := make(chan struct{})
		go func() { defer close(done); res = g.runLoad(ctx, targets, plan.Rate, plan.Churn+2*time.Second) }()
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		var c churnCounts
		c.seconds = paced(ctx, plan.ChangesPerSecond, plan.Churn, func(k int) { change(k, &c) })
		<-done
		u1 := treeUsage(pid)
		failed := res.non2xx + res.connErrs + res.wrong
		target := int64(float64(plan.Rate) * (plan.Churn + 2*time.Second).Seconds())
		var notes []string
		if c.apiErrors > 0 {
			notes = append(notes, fmt.Sprintf("%d route changes failed, the last: %v", c.apiErrors, c.lastErr))
		}
		if res.late*100 > target {
			notes = append(notes, fmt.Sprintf("%d requests not sent in time (over 1 %%)", res.late))
		}
		if ctx.Err() != nil {
			notes = append(notes, "interrupted")
		}
		changes := c.added + c.updated + c.deleted
		rec := runRecord{Scenario: gatewaybench.Scenario, Peer: "lbplane", Variant: variant, API: "delta", Policies: len(fillers),
			Requests: res.sent, Errors: failed, RPS: float64(res.sent) / res.seconds, Valid: len(notes) == 0, Note: strings.Join(notes, "; "),
			P50: percentile(res.lat, 50), P90: percentile(res.lat, 90), P99: percentile(res.lat, 99), P999: percentile(res.lat, 99.9),
			LbplaneRSS: u1.RSSBytes, LbplaneCPUPerChangeMs: (u1.CPUSeconds - u0.CPUSeconds) * 1000 / float64(max(changes, 1)),
			Extra: map[string]float64{"targetRate": float64(plan.Rate), "seconds": c.seconds, "loadSeconds": res.seconds, "non2xx": float64(res.non2xx),
				"connectionErrors": float64(res.connErrs), "wrongRoute": float64(res.wrong), "late": float64(res.late), "ok": float64(res.ok),
				"added": float64(c.added), "updated": float64(c.updated), "deleted": float64(c.deleted), "apiErrors": float64(c.apiErrors),
				"targetChangesPerSecond": float64(plan.ChangesPerSecond), "changesPerSecond": float64(changes) / max(c.seconds, 0.001),
				"loadedRoutes": float64(len(targets)), "maxMs": percentile(res.lat, 100),
				"lbplaneCPUSeconds": u1.CPUSeconds - u0.CPUSeconds, "lbplaneCoreShare": (u1.CPUSeconds - u0.CPUSeconds) / res.seconds}}
		record(rec)
		fmt.Fprintf(os.Stderr, "gateway routes, %s: %d requests in %.1f s over %d routes: %d non-2xx, %d connection errors, %d from another route, %d late; %d added, %d updated, %d deleted (%d API errors) in %.1f s; p99 %.2f ms; lbplane %.0f %% of a core %s\n",
			variant, res.sent, res.seconds, len(targets), res.non2xx, res.connErrs, res.wrong, res.late, c.added, c.updated, c.deleted, c.apiErrors, c.seconds, rec.P99, rec.Extra["lbplaneCoreShare"]*100, rec.Note)
		if len(res.failures) > 0 {
			path := filepath.Join(out, "gateway-routes-"+variant+"-failures.txt")
			os.WriteFile(path, []byte(strings.Join(res.failures, "\n")+"\n"), 0o644)
			fmt.Fprintf(os.Stderr, "gateway routes, %s: the first failed requests are in %s\n", variant, path)
		}
		return nil
	}

	// Around the load: add a route (on a loaded route's host name, or a host name of its own), change an
	// attached route's path and header match, change an added route's path and request header, delete the
	// oldest added route.
	var pool []gwRoute
	gen := map[string]int{}
	next := 0
	if err := phase(gatewaybench.Churn, func(k int, c *churnCounts) {
		switch k % 4 {
		case 0:
			r := gwRoute{name: fmt.Sprintf("c-%05d", k), path: fmt.Sprintf("/c-%05d", k), refs: []gwRef{{k % gwServices, 1}}}
			if k/4%2 == 0 {
				r.host = sharedLoadedHosts[k/8%len(sharedLoadedHosts)]
			} else {
				r.host = r.name + "." + gwDomain
			}
			err := g.cl.Create(ctx, r.object())
			if err == nil {
				pool = append(pool, r)
			}
			c.count(err, &c.added)
		case 1:
			if len(neighbours) == 0 {
				return
			}
			i := neighbours[next%len(neighbours)]
			next++
			r := fillers[i]
			gen[r.name]++
			v := gen[r.name]
			r.path = fmt.Sprintf("%s-v%d", fillers[i].path, v)
			if v%2 == 1 {
				r.match = fmt.Sprintf("v%d", v)
			}
			r.refs = []gwRef{{(i + v) % gwServices, 1}}
			c.count(g.patchSpec(ctx, r), &c.updated)
		case 2:
			if len(pool) == 0 {
				return
			}
			r := pool[0]
			pool = append(pool[1:], r)
			gen[r.name]++
			r.path = fmt.Sprintf("/%s-v%d", r.name, gen[r.name])
			r.setHeader = fmt.Sprintf("v%d", gen[r.name])
			c.count(g.patchSpec(ctx, r), &c.updated)
		case 3:
			if len(pool) == 0 {
				return
			}
			r := pool[0]
			pool = pool[1:]
			c.count(g.cl.Delete(ctx, r.object()), &c.deleted)
		}
	}); err != nil {
		return err
	}
	// The loaded routes themselves: weights, Service and request header change, one route at a time.
	if err := phase(gatewaybench.UpdateUnderLoad, func(k int, c *churnCounts) {
		i := loaded[k%len(loaded)]
		c.count(g.patchSpec(ctx, gwUnderLoad(fillers[i], i, k/len(loaded)+1)), &c.updated)
	}); err != nil {
		return err
	}
	for _, r := range pool {
		if err := g.cl.Delete(ctx, r.object()); err != nil {
			return fmt.Errorf("deleting HTTPRoute %s: %w", r.name, err)
		}
	}
	return nil
}

// memory applies M routes to a fresh lbplane and Envoy that serve only the Gateway and one route: the time
// until the last is served and until lbplane has settled (every route's status written, its CPU quiet), the
// CPU-seconds lbplane and Envoy spent from the first create to there, and their RSS.
func (g *gwBench) memory(ctx context.Context, plan gatewayRoutesPlan, out string, record func(runRecord)) error {
	pid, epid := g.lb.cmd.Process.Pid, g.envoy.cmd.Process.Pid
	first := gwRoute{name: "first", host: "first." + gwDomain, path: "/first", refs: []gwRef{{0, 1}}}
	if err := g.cl.Create(ctx, first.object()); err != nil {
		return err
	}
	if _, _, ok := g.served(ctx, first, 5*time.Millisecond, time.Minute); !ok {
		return errors.New("gateway routes: the fresh lbplane's Envoy did not serve a first route within a minute")
	}
	if _, ok := g.acceptedAt(ctx, first.name, time.Minute); !ok {
		return errors.New("gateway routes: the fresh lbplane did not accept a first route within a minute")
	}
	waitSettled([]int{pid, epid})
	idle, envoyIdle := treeUsage(pid), treeUsage(epid)
	m := plan.MemoryRoutes
	routes := make([]gwRoute, m)
	want := map[string]bool{}
	for i := range m {
		routes[i] = gwFiller(i, m)
		want[routes[i].name] = true
	}
	begin := time.Now()
	if err := g.apply(ctx, routes); err != nil {
		return err
	}
	created := time.Since(begin)
	var notes []string
	// The last route written is, but for the writers' order, the last lbplane learns of.
	servedOK := true
	if _, _, ok := g.served(ctx, routes[m-1], 5*time.Millisecond, gwApplyLimit); !ok {
		servedOK = false
		notes = append(notes, fmt.Sprintf("the last route was not served within %s", gwApplyLimit))
	}
	servedAfter := time.Since(begin)
	atServed, envoyServed := treeUsage(pid), treeUsage(epid)
	if got := g.allServed(ctx, routes, gwApplyLimit); got != m {
		notes = append(notes, fmt.Sprintf("%d of %d routes served", got, m))
	}
	got, acceptedAt, ok := g.allAccepted(ctx, want, gwApplyLimit)
	if !ok {
		notes = append(notes, fmt.Sprintf("%d of %d routes accepted", got, m))
	}
	if _, ok := waitSettled([]int{pid, epid}); !ok {
		notes = append(notes, "lbplane or Envoy still busy a minute after the last status")
	}
	settledAfter := time.Since(begin)
	settled, envoySettled := treeUsage(pid), treeUsage(epid)
	heap := profile(g.metrics, 0, out, fmt.Sprintf("gateway-routes-%d-heap", m))
	rec := runRecord{Scenario: gatewaybench.Scenario, Peer: "lbplane", Variant: gatewaybench.Memory, API: "delta", Policies: m,
		Valid: len(notes) == 0 && ctx.Err() == nil, Note: strings.Join(notes, "; "), LbplaneRSS: settled.RSSBytes,
		Extra: map[string]float64{"hostnames": float64(gwHostnames(m)), "createSeconds": created.Seconds(), "servedSeconds": servedAfter.Seconds(),
			"settledSeconds": settledAfter.Seconds(), "acceptedSeconds": acceptedAt.Sub(begin).Seconds(), "cpuToServedSeconds": atServed.CPUSeconds - idle.CPUSeconds,
			"cpuToSettledSeconds": settled.CPUSeconds - idle.CPUSeconds, "idleRSS": float64(idle.RSSBytes), "servedRSS": float64(atServed.RSSBytes),
			"rssPerRouteKiB": float64(settled.RSSBytes-idle.RSSBytes) / float64(m) / 1024,
			"envoyIdleRSS":   float64(envoyIdle.RSSBytes), "envoyRSS": float64(envoySettled.RSSBytes), "envoyServedRSS": float64(envoyServed.RSSBytes),
			"envoyCPUSeconds": envoySettled.CPUSeconds - envoyIdle.CPUSeconds, "envoyCPUToServedSeconds": envoyServed.CPUSeconds - envoyIdle.CPUSeconds,
			"lastServed": float64(boolInt(servedOK))}}
	record(rec)
	fmt.Fprintf(os.Stderr, "gateway routes, memory: %d routes on %d host names created in %.1f s, the last served after %.1f s, settled after %.1f s; lbplane %.1f CPU-s to served, %.1f to settled; RSS %d → %d → %d MiB (%.1f KiB per route); Envoy RSS %d → %d MiB, %.1f CPU-s %s\n%s\n",
		m, gwHostnames(m), created.Seconds(), servedAfter.Seconds(), settledAfter.Seconds(), rec.Extra["cpuToServedSeconds"], rec.Extra["cpuToSettledSeconds"],
		idle.RSSBytes>>20, atServed.RSSBytes>>20, settled.RSSBytes>>20, rec.Extra["rssPerRouteKiB"], envoyIdle.RSSBytes>>20, envoySettled.RSSBytes>>20, rec.Extra["envoyCPUSeconds"], rec.Note, heap)
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gatewayRoutesRuns are the row's runs as the report's tables read them, named after the results directory
// (as bench/summarize names a runs.jsonl's runs).
func (r *report) gatewayRoutesRuns(out string) []gatewaybench.Run {
	var runs []gatewaybench.Run
	for _, x := range r.Runs {
		if x.Scenario != gatewaybench.Scenario {
			continue
		}
		b, _ := json.Marshal(x)
		var g gatewaybench.Run
		json.Unmarshal(b, &g)
		g.Dir = filepath.Base(out)
		runs = append(runs, g)
	}
	return runs
}

// gatewayRoutesOnly tells whether the report holds the gateway-routes row alone: it is then a report of its
// own, with the summary markers bench/summarize fills from runs.jsonl.
func (r *report) gatewayRoutesOnly() bool {
	if r.GatewayRoutes == nil || len(r.Hash)+len(r.HotKey)+len(r.Health)+len(r.WebSocket) > 0 || r.Rollout != nil {
		return false
	}
	for _, x := range r.Runs {
		if x.Scenario != gatewaybench.Scenario {
			return false
		}
	}
	return true
}

const gatewayRoutesQuestion = "With N HTTPRoutes attached to one Gateway, how long from a new HTTPRoute's create to its first 200 through Envoy (the target: p99 ≤ 50 ms at 3,000)? Does any request fail while routes are added, updated and deleted beside a constant load, and while the loaded routes themselves change? What do lbplane and its Envoy hold and spend for 5,000 routes?"

// gatewayRoutesReport is REPORT.md when the row ran alone: the question, the machine, the command, what was
// done, the verdicts and the tables between summary markers.
func (r *report) gatewayRoutesReport(out string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p := r.GatewayRoutes
	m := r.Machine
	w("# Gateway API routes: propagation, changes under load, memory at scale\n\n")
	w("**Question.** %s (issue 44)\n\n", gatewayRoutesQuestion)
	w("**Machine.** %s, %s CPUs, %s memory, Linux %s, Envoy %s, %s; 1-minute load average %s before the row, %s after (`uptime-before.txt`, `uptime-after.txt`).\n\n",
		m["cpu"], m["cpus"], memoryGiB(m["memory"]), m["kernel"], envoyVersion(m["envoy"]), m["go"], p.LoadBefore, p.LoadAfter)
	w("**Command** (%s UTC, %s):\n\n```sh\n%s\n```\n\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Sub(r.Started).Round(time.Second), r.Command)
	r.gatewayRoutesMethod(w)
	runs := r.gatewayRoutesRuns(out)
	w("\n## Result\n\n")
	for _, line := range gatewayRoutesVerdicts(runs) {
		w("- %s\n", line)
	}
	src := "runs.jsonl"
	for _, part := range gatewaybench.Parts {
		t, err := gatewaybench.Table(part, runs)
		if err != nil {
			continue
		}
		w("\n### %s\n\n<!-- summary:begin kind=gateway-routes src=%s part=%s -->\n%s<!-- summary:end -->\n", gatewayRoutesTitles[part], src, part, t)
	}
	return b.String()
}

var gatewayRoutesTitles = map[string]string{
	"propagation": "A new HTTPRoute to its first 200",
	"churn":       "Requests while routes change",
	"memory":      "lbplane and Envoy at scale",
}

func (r *report) gatewayRoutesMethod(w func(string, ...any)) {
	p := r.GatewayRoutes
	w("**How.** lbplane in Kubernetes mode (`--gateway-api`) on a real kube-apiserver with etcd, one Envoy (delta xDS, one worker), one Gateway with one HTTP listener. The routes go to %d Services, each with %d endpoints: `lbplane-backend` listeners in a network namespace the row makes (198.18.0.0/15), one EndpointSlice per endpoint. Every route is one rule on one host name: a path prefix of its own, a response header naming the route (`%s`, so that a 200 says which route answered), weights and a request header on some. A quarter of the routes have a host name of their own; the others share one with about fifteen more, as teams share a domain.\n\n",
		p.Services, p.Endpoints, gwRouteHeader)
	w("- **Propagation**: %d routes attached (every one served through Envoy and accepted in its status first); then %d new routes, one at a time with lbplane quiet before each: alternately with a host name of their own (a new virtual host) and a path on a shared host name (a virtual host changed). Each is timed from the create call's answer to the first 200 from it (its own `X-Route`) through Envoy, asked on one keep-alive connection, a request every %s at the earliest and none before the last was answered (for at most %s); then to lbplane's Accepted status on the route (read every 5 ms after the 200). The new routes are deleted again afterwards.\n",
		p.Routes, p.Samples, p.Poll, gwSampleLimit)
	if p.Churn > 0 {
		w("- **Changes under load**: %d requests a second (%d workers, keep-alive, 5 s timeout) over %d of the attached routes, own and shared host names, from a second before the changes to a second after. Every non-2xx, connection error and answer from another route counts as failed; a request due while every worker is busy is not sent (late). *Other routes change*: for %s, %d changes a second in turn: a route added (on a loaded route's host name, or its own), an attached route's path and header match changed (those on the loaded host names first), an added route's path and request header changed, the oldest added route deleted. *The loaded routes change*: for %s, %d changes a second to the loaded routes themselves in turn: weights 3:1, 1:3 with a request header, all to another Service, back; path, host name and response header stay, so no request may fail.\n",
			p.Rate, gwLoadWorkers, p.Loaded, p.Churn, p.ChangesPerSecond, p.Churn, p.ChangesPerSecond)
	}
	if p.MemoryRoutes > 0 {
		w("- **At scale**: the routes deleted, a fresh lbplane and Envoy serving the Gateway and one route, quiet; then %d routes created by %d writers at once. Times from the first create: until the last route written is served through Envoy, and until every route's status is written and lbplane and Envoy are quiet (under a tenth of a core for two windows of 0.5 s). CPU-seconds and RSS (its process, from /proc) of lbplane and Envoy from the quiet start (Envoy's include the runner's requests: one every 5 ms for the last route, then one per route); the heap profile at the end is beside the results (`gateway-routes-%d-heap.top.txt`).\n",
			p.MemoryRoutes, gwCreateWorkers, p.MemoryRoutes)
	}
}

// gatewayRoutesVerdicts says, per phase, whether the targets were met.
func gatewayRoutesVerdicts(runs []gatewaybench.Run) []string {
	var out []string
	for _, r := range runs {
		switch r.Variant {
		case gatewaybench.Propagation:
			p99 := percentile(r.Samples, 99)
			verdict := "within"
			if p99 > gatewaybench.TargetP99Ms || len(r.Samples) == 0 {
				verdict = "over"
			}
			out = append(out, fmt.Sprintf("A new route among %d served its first 200 %.1f ms after the create was answered at p99 (p50 %.1f, max %.1f; %d new routes, asked every %.1f ms on average): %s the target of %d ms at p99 set for 3,000 routes%s.",
				r.Policies, p99, percentile(r.Samples, 50), percentile(r.Samples, 100), len(r.Samples), r.Extra["meanPollGapMs"], verdict, gatewaybench.TargetP99Ms, invalidNote(r)))
		case gatewaybench.Churn, gatewaybench.UpdateUnderLoad:
			what := "other routes changed"
			if r.Variant == gatewaybench.UpdateUnderLoad {
				what = "the loaded routes changed"
			}
			verdict := "none failed"
			if r.Errors > 0 {
				verdict = fmt.Sprintf("%d failed (%s non-2xx, %s connection errors, %s from another route)", r.Errors,
					strconv.FormatFloat(r.Extra["non2xx"], 'f', 0, 64), strconv.FormatFloat(r.Extra["connectionErrors"], 'f', 0, 64), strconv.FormatFloat(r.Extra["wrongRoute"], 'f', 0, 64))
			}
			out = append(out, fmt.Sprintf("While %s (%.0f changes), %d requests: %s%s.", what, r.Extra["added"]+r.Extra["updated"]+r.Extra["deleted"], r.Requests, verdict, invalidNote(r)))
		case gatewaybench.Memory:
			out = append(out, fmt.Sprintf("%d routes: lbplane's RSS %s MiB once settled (%s MiB with the Gateway alone), %.1f CPU-seconds until the last was served after %.1f s, %.1f until settled after %.1f s; Envoy's RSS %s MiB%s.",
				r.Policies, mib(r.LbplaneRSS), mib(r.Extra["idleRSS"]), r.Extra["cpuToServedSeconds"], r.Extra["servedSeconds"], r.Extra["cpuToSettledSeconds"], r.Extra["settledSeconds"], mib(r.Extra["envoyRSS"]), invalidNote(r)))
		}
	}
	return out
}

func invalidNote(r gatewaybench.Run) string {
	if r.Valid {
		return ""
	}
	return " (not a valid run: " + r.Note + ")"
}

// gatewayRoutesMarkdown is the row's section of the whole report.
func (r *report) gatewayRoutesMarkdown(w func(string, ...any), out string) {
	runs := r.gatewayRoutesRuns(out)
	if r.GatewayRoutes == nil || len(runs) == 0 {
		return
	}
	w("\n## Gateway API routes\n\n%s\n\n", gatewayRoutesQuestion)
	r.gatewayRoutesMethod(w)
	w("\n")
	for _, line := range gatewayRoutesVerdicts(runs) {
		w("- %s\n", line)
	}
	for _, part := range gatewaybench.Parts {
		if t, err := gatewaybench.Table(part, runs); err == nil {
			w("\n%s\n", t)
		}
	}
}

// gatewayRoutesNamed tells whether -only names the row (opt-in: not in make bench).
func gatewayRoutesNamed(only string) bool {
	return slices.Contains(strings.Split(only, ","), "gateway-routes")
}
