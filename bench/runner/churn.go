package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbplane/lbplane/api/v1alpha1"
	envoybootstrap "github.com/lbplane/lbplane/envoy-bootstrap"
)

// The churn, cold-start and fan-out rows have their own ports, away from the other control-plane rows.
const (
	churnListenerPort = 29301
	churnBase         = 29310 // xDS, API, metrics (pprof), Envoy admin
)

// churnPlan is the endpoint-churn row: policies Service-backed policies whose EndpointSlices are written
// rate times a second for duration.
type churnPlan struct {
	Policies int           `json:"policies"`
	Rate     int           `json:"rate"`
	Duration time.Duration `json:"duration"`
	// EndpointIntervals are lbplane serve's --endpoint-update-interval of each run (0: none).
	EndpointIntervals []time.Duration `json:"endpointIntervals,omitempty"`
}

func churnClusterName(i int) string { return fmt.Sprintf("default/p-%04d/web", i) }

// churnAddr is the k-th address an EndpointSlice gets: each change a new one, so that a receipt tells
// which change it carries. The API server refuses loopback addresses in an EndpointSlice; nothing sends
// traffic to these (the row measures membership, not requests).
func churnAddr(k int) string { return fmt.Sprintf("10.2.%d.%d", k/250%250, k%250+1) }

func churnFirstAddr(i int) string { return fmt.Sprintf("10.1.%d.%d", i/250, i%250+1) }

func churnSlice(i int, addr string) *discoveryv1.EndpointSlice {
	name, port := "", int32(8080)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s-%04d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
}

// pending is a change written and not yet seen: its address and when its write was sent.
type pending struct {
	addr string
	sent time.Time
}

// endpointChurn writes EndpointSlices behind Service-backed policies at a fixed rate through a real
// kube-apiserver, with lbplane watching it and a real Envoy connected. Two clocks per change, both from the
// write sent: an EDS client in this process (a delta ADS stream subscribed to every cluster's endpoints)
// times every change; a sampler reads the real Envoy's admin (the EDS config dump of one cluster) for the
// newest change until it shows, then the next newest.
// lbplane's CPU and RSS from /proc; the status writes from the API server's own request counter.
func endpointChurn(ctx context.Context, e *env, p churnPlan, interval time.Duration, out string, record func(runRecord)) error {
	dir := filepath.Join(e.dir, fmt.Sprintf("churn-%s", interval))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cluster, stopCluster, err := startCluster(dir)
	if err != nil {
		return err
	}
	defer stopCluster()
	cl := cluster.Client
	slices := make([]*discoveryv1.EndpointSlice, p.Policies)
	create := func(i int) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		pol := &v1alpha1.LoadBalancerPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: "default"},
			Spec: v1alpha1.LoadBalancerPolicySpec{
				Listener: v1alpha1.Listener{Address: "127.0.0.1", Port: churnListenerPort, Protocol: v1alpha1.ProtocolHTTP, Hostnames: []string{fmt.Sprintf("p-%04d.bench.local", i)}},
				Backends: []v1alpha1.Backend{{Name: "web", Service: &v1alpha1.ServiceRef{Name: svc.Name, Port: 80}}}}}
		slices[i] = churnSlice(i, churnFirstAddr(i))
		for _, o := range []client.Object{svc, slices[i], pol} {
			if err := cl.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range p.Policies {
		g.Go(func() error { return create(i) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("creating %d Services, EndpointSlices and policies: %w", p.Policies, err)
	}
	fmt.Fprintf(os.Stderr, "churn: %d Services, EndpointSlices and policies created\n", p.Policies)

	xds, apiAddr := fmt.Sprintf("127.0.0.1:%d", churnBase), fmt.Sprintf("127.0.0.1:%d", churnBase+1)
	pprofPort, adminPort := churnBase+2, churnBase+3
	args := append(serveArgs(dir, xds, apiAddr, "--kubernetes", "--kubeconfig", cluster.Kubeconfig, "--endpoint-update-interval", interval.String()), pprofArgs(pprofPort)...)
	lb, err := serveLbplane(e, dir, apiAddr, 60*time.Second, args)
	if err != nil {
		return err
	}
	defer lb.stop()
	envoy, err := startEnvoy(e, dir, envoybootstrap.Params{NodeID: "bench-churn", XDS: xds, Delta: true, AdminPort: adminPort, InsecureAdminTCP: true, MaxConnections: 10000})
	if err != nil {
		return err
	}
	defer envoy.stop()

	// The EDS client.
	var mu sync.Mutex
	waiting := map[string]pending{}
	var edsLags []float64
	// The lag's parts (see the watch below): write acknowledged; seen by a watch beside lbplane; from that
	// watch to the EDS client, per change (lbplane's share: the wait for a resync, the resync, the send).
	var ackLags, watchLags, afterWatch []float64
	watchedAt, edsAt := map[string]time.Time{}, map[string]time.Time{} // by address, whichever sees it first
	seen := map[string]bool{}
	var edsResponses []time.Time // when each EDS response reached the EDS client
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(sctx)
	if err != nil {
		return err
	}
	var names []string
	for i := range p.Policies {
		names = append(names, churnClusterName(i))
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "bench-eds", Cluster: "default"}, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names}); err != nil {
		return err
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			now := time.Now()
			if r.GetTypeUrl() == resource.EndpointType {
				mu.Lock()
				edsResponses = append(edsResponses, now)
				mu.Unlock()
			}
			for _, res := range r.GetResources() {
				var cla endpointv3.ClusterLoadAssignment
				if res.GetResource().UnmarshalTo(&cla) != nil {
					continue
				}
				mu.Lock()
				seen[res.GetName()] = true
				if w, ok := waiting[res.GetName()]; ok && claHas(&cla, w.addr) {
					edsLags = append(edsLags, float64(now.Sub(w.sent).Microseconds())/1000)
					if t, ok := watchedAt[w.addr]; ok {
						afterWatch = append(afterWatch, float64(now.Sub(t).Microseconds())/1000)
						delete(watchedAt, w.addr)
					} else {
						edsAt[w.addr] = now
					}
					delete(waiting, res.GetName())
				}
				mu.Unlock()
			}
			if stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}) != nil {
				return
			}
		}
	}()

	admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	clusters := func() (string, time.Duration) {
		t := time.Now()
		resp, err := admin.Get(fmt.Sprintf("http://127.0.0.1:%d/clusters", adminPort))
		if err != nil {
			return "", 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), time.Since(t)
	}
	// One cluster's endpoints as the Envoy holds them (its EDS config dump, filtered by name): a few
	// hundred bytes where /clusters is every cluster's every host with its counters (megabytes, tens of
	// milliseconds of the main thread that also applies xDS).
	endpointsOf := func(name string) string {
		resp, err := admin.Get(fmt.Sprintf("http://127.0.0.1:%d/config_dump?resource=dynamic_endpoint_configs&include_eds&name_regex=%s", adminPort, url.QueryEscape("^"+name+"$")))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	last := churnClusterName(p.Policies-1) + "::"
	if !waitFor(5*time.Minute, func() bool {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n < p.Policies {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		s, _ := clusters()
		return strings.Contains(s, last)
	}) {
		return fmt.Errorf("churn: the EDS client or the Envoy never had all %d clusters", p.Policies)
	}
	// Every policy's status is written once they are programmed; the churn starts when that has settled.
	var writes int64
	if !waitFor(5*time.Minute, func() bool {
		time.Sleep(3 * time.Second)
		n, err := statusWrites(ctx, cluster.Config)
		settled := err == nil && n == writes && n > 0
		writes = n
		return settled
	}) {
		return fmt.Errorf("churn: lbplane's status writes did not settle")
	}
	body, took := clusters()
	t0 := time.Now()
	one := endpointsOf(churnClusterName(0))
	fmt.Fprintf(os.Stderr, "churn: synced; %d status writes so far; Envoy's /clusters is %d KiB, read in %s; one cluster's EDS dump %d bytes, read in %s\n",
		writes, len(body)>>10, took, len(one), time.Since(t0))

	// The sampler: the newest change, read from the Envoy's /clusters until it shows; then the next newest.
	type change struct {
		name string
		pending
	}
	var newest change
	var envoyLags []float64
	var polls int
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stopSampler:
				return
			default:
			}
			mu.Lock()
			c := newest
			mu.Unlock()
			if c.name == "" {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			want := `"` + c.addr + `"`
			for {
				t := time.Now()
				s := endpointsOf(c.name)
				took := time.Since(t)
				polls++
				if strings.Contains(s, want) {
					mu.Lock()
					envoyLags = append(envoyLags, float64(time.Since(c.sent).Microseconds())/1000)
					mu.Unlock()
					break
				}
				// Envoy builds every cluster's dump before it filters (tens of milliseconds at 1,000 here, on the
				// main thread that also applies xDS): a pause as long as the read keeps the sampler to half of it.
				select {
				case <-stopSampler:
					return
				case <-time.After(took):
				}
			}
		}
	}()

	// The lag's first part, measured beside lbplane on the same API server: when the write is acknowledged,
	// and when a watch of EndpointSlices (as lbplane's informer holds one) delivers it. What the EDS client
	// sees later than the watch is lbplane's part (the wait for a resync, the resync, the xDS send).
	sentAt := map[string]time.Time{} // by address: each change has its own
	wc, err := client.NewWithWatch(cluster.Config, client.Options{})
	if err != nil {
		return err
	}
	watch, err := wc.Watch(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace("default"))
	if err != nil {
		return err
	}
	defer watch.Stop()
	go func() {
		for ev := range watch.ResultChan() {
			now := time.Now()
			sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			mu.Lock()
			for _, ep := range sl.Endpoints {
				for _, a := range ep.Addresses {
					if t, ok := sentAt[a]; ok {
						watchLags = append(watchLags, float64(now.Sub(t).Microseconds())/1000)
						if e, ok := edsAt[a]; ok { // the EDS client was first
							afterWatch = append(afterWatch, float64(e.Sub(now).Microseconds())/1000)
							delete(edsAt, a)
						} else {
							watchedAt[a] = now
						}
						delete(sentAt, a)
					}
				}
			}
			mu.Unlock()
		}
	}()

	before := treeUsage(lb.cmd.Process.Pid)
	var profTop string
	profDone := make(chan struct{})
	go func() {
		defer close(profDone)
		profTop = profile(pprofPort, int(p.Duration.Seconds()), out, fmt.Sprintf("churn-cpu-%s", interval))
	}()
	// Writers: each change k sets slice k mod N to a new address; a change is sent at its scheduled time or,
	// when the API server is slower than the rate, as soon as a writer is free (the achieved rate is reported).
	work := make(chan int)
	var wg sync.WaitGroup
	var writeErrs int
	var lastErr error
	// 32 writers: on a loaded machine one write takes the API server and etcd hundreds of milliseconds.
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				i := k % p.Policies
				s := slices[i]
				addr := churnAddr(k)
				s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{addr}}}
				sent := time.Now()
				mu.Lock()
				waiting[churnClusterName(i)] = pending{addr, sent}
				newest = change{churnClusterName(i), pending{addr, sent}}
				sentAt[addr] = sent
				mu.Unlock()
				if err := cl.Update(ctx, s); err != nil {
					mu.Lock()
					writeErrs++
					lastErr = err
					delete(waiting, churnClusterName(i))
					delete(sentAt, addr)
					mu.Unlock()
				} else {
					mu.Lock()
					ackLags = append(ackLags, float64(time.Since(sent).Microseconds())/1000)
					mu.Unlock()
				}
			}
		}()
	}
	begin := time.Now()
	every := time.Second / time.Duration(p.Rate)
	k := 0
	for ; time.Since(begin) < p.Duration && ctx.Err() == nil; k++ {
		if d := time.Until(begin.Add(time.Duration(k) * every)); d > 0 {
			time.Sleep(d)
		}
		work <- k
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(begin)
	stormEnd := time.Now()
	// The last changes get up to 30 s to arrive: at the EDS client, and at the Envoy (every cluster with the
	// last address written to it).
	lastAddr := map[string]string{}
	for i, sl := range slices {
		lastAddr[churnClusterName(i)] = sl.Endpoints[0].Addresses[0]
	}
	converged := -1.0
	if waitFor(30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(waiting) == 0 }) {
		converged = float64(time.Since(stormEnd).Microseconds()) / 1000
	}
	envoyConverged := -1.0
	if waitFor(30*time.Second, func() bool {
		resp, err := admin.Get(fmt.Sprintf("http://127.0.0.1:%d/config_dump?resource=dynamic_endpoint_configs&include_eds", adminPort))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, a := range lastAddr {
			if !strings.Contains(string(b), `"`+a+`"`) {
				return false
			}
		}
		return true
	}) {
		envoyConverged = float64(time.Since(stormEnd).Microseconds()) / 1000
	}
	after := treeUsage(lb.cmd.Process.Pid)
	close(stopSampler)
	<-samplerDone
	<-profDone
	time.Sleep(3 * time.Second) // a status write caused by the last changes would land by now
	writesAfter, err := statusWrites(ctx, cluster.Config)
	if err != nil {
		return err
	}
	mu.Lock()
	// EDS responses to the EDS client during the storm, in all and in its busiest second.
	var stormResponses int
	perSecond := map[int]int{}
	for _, at := range edsResponses {
		if at.Before(begin) || at.After(stormEnd) {
			continue
		}
		stormResponses++
		perSecond[int(at.Sub(begin)/time.Second)]++
	}
	busiest := 0
	for _, n := range perSecond {
		busiest = max(busiest, n)
	}
	missing := len(waiting)
	eds, envL := edsLags, envoyLags
	acks, watched, lbShare := ackLags, watchLags, afterWatch
	mu.Unlock()
	written := k - writeErrs
	rec := runRecord{Scenario: "churn", Peer: "lbplane", Variant: "kubernetes", API: "delta", Policies: p.Policies, Samples: eds, Valid: missing == 0 && writeErrs == 0,
		P50: percentile(eds, 50), P99: percentile(eds, 99), P999: percentile(eds, 100), LbplaneRSS: after.RSSBytes,
		LbplaneCPUPerChangeMs: (after.CPUSeconds - before.CPUSeconds) * 1000 / float64(max(written, 1)),
		Extra: map[string]float64{
			"targetRate": float64(p.Rate), "achievedRate": float64(written) / elapsed.Seconds(), "seconds": elapsed.Seconds(),
			"writes": float64(written), "writeErrors": float64(writeErrs), "missing": float64(missing),
			"statusWrites": float64(writesAfter - writes), "lbplaneCPUSeconds": after.CPUSeconds - before.CPUSeconds,
			"lbplaneCoreShare": (after.CPUSeconds - before.CPUSeconds) / elapsed.Seconds(),
			"envoySamples":     float64(len(envL)), "envoyP50Ms": percentile(envL, 50), "envoyP99Ms": percentile(envL, 99), "envoyMaxMs": percentile(envL, 100),
			"clustersPolls": float64(polls), "clustersKiB": float64(len(body) >> 10),
			"writeAckP50Ms": percentile(acks, 50), "writeAckP99Ms": percentile(acks, 99),
			"watchP50Ms": percentile(watched, 50), "watchP99Ms": percentile(watched, 99), "watchSamples": float64(len(watched)),
			"watchToEDSP50Ms": percentile(lbShare, 50), "watchToEDSP99Ms": percentile(lbShare, 99), "watchToEDSSamples": float64(len(lbShare)),
			"edsResponses": float64(stormResponses), "edsResponsesPerSecond": float64(stormResponses) / elapsed.Seconds(), "edsResponsesBusiestSecond": float64(busiest),
			"convergedAfterMs": converged, "envoyConvergedAfterMs": envoyConverged, "endpointIntervalMs": float64(interval.Milliseconds())}}
	if writeErrs > 0 {
		rec.Note = fmt.Sprintf("%d writes failed, the last: %v", writeErrs, lastErr)
	}
	record(rec)
	fmt.Fprintf(os.Stderr, "churn %d policies: %d EndpointSlice writes in %.1f s (%.1f/s of %d/s), %d never seen; EDS client lag p50 %.1f ms p99 %.1f ms max %.1f ms; Envoy /clusters (%d samples) p50 %.1f ms p99 %.1f ms; lbplane %.2f ms CPU/change (%.0f %% of a core), RSS %d MiB; %d status writes\n%s\n",
		p.Policies, written, elapsed.Seconds(), rec.Extra["achievedRate"], p.Rate, missing, rec.P50, rec.P99, rec.P999, len(envL), rec.Extra["envoyP50Ms"], rec.Extra["envoyP99Ms"],
		rec.LbplaneCPUPerChangeMs, rec.Extra["lbplaneCoreShare"]*100, after.RSSBytes>>20, writesAfter-writes, profTop)
	fmt.Fprintf(os.Stderr, "churn storm: the EDS client got %d EDS responses (%.1f/s, %d in the busiest second); after the last write it had every change in %.0f ms, the Envoy every cluster's last address in %.0f ms (-1: not within 30 s)\n",
		stormResponses, rec.Extra["edsResponsesPerSecond"], busiest, converged, envoyConverged)
	fmt.Fprintf(os.Stderr, "churn lag breakdown: write acknowledged p50 %.1f ms p99 %.1f ms; a watch beside lbplane sees it (%d samples) p50 %.1f ms p99 %.1f ms; from that watch to the EDS client (%d) p50 %.1f ms p99 %.1f ms; EDS client p50 %.1f ms p99 %.1f ms\n",
		rec.Extra["writeAckP50Ms"], rec.Extra["writeAckP99Ms"], len(watched), rec.Extra["watchP50Ms"], rec.Extra["watchP99Ms"], len(lbShare), rec.Extra["watchToEDSP50Ms"], rec.Extra["watchToEDSP99Ms"], rec.P50, rec.P99)
	return nil
}

func claHas(cla *endpointv3.ClusterLoadAssignment, addr string) bool {
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == addr {
				return true
			}
		}
	}
	return false
}
