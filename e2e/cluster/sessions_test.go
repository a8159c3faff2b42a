//go:build cluster

package cluster

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// drainSetup: three backend pods whose preStop hook keeps a deleted pod terminating, and serving, for 60 s
// (the kubelet's sleep action: the image has no shell), and a policy with cookie sessions over them on a
// port of its own (managedPorts gives the Envoy Service a NodePort for it).
const drainSetup = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: drain-backend, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: drain-backend}}
  template:
    metadata: {labels: {app: drain-backend}}
    spec:
      terminationGracePeriodSeconds: 90
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: backend
          image: ghcr.io/lbplane/lbplane:dev
          imagePullPolicy: Never
          command: [/lbplane-backend, --listen, "0.0.0.0:8080", --drain, 5s]
          env:
            - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
          args: [--name, $(POD_NAME)]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 2, failureThreshold: 1}
          lifecycle: {preStop: {sleep: {seconds: 60}}}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: drain-backend, namespace: default}
spec:
  selector: {app: drain-backend}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: lbplane.io/v1alpha1
kind: LoadBalancerPolicy
metadata: {name: drain, namespace: default}
spec:
  listener: {port: 10092, protocol: HTTP}
  routes:
    - backends: [{name: app}]
      sessionPersistence: {type: Cookie, name: sticky}
  backends:
    - name: app
      healthCheck: {active: {type: HTTP, interval: 2s, http: {path: /healthz}}}
      service: {name: drain-backend, port: 80}
`

// The phases of drainingSessions; a request is counted in the phase it was sent and answered in.
const (
	phaseBefore    = iota // before the pod is deleted
	phasePropagate        // deleted, until every Envoy holds its endpoint DRAINING (status says so)
	phaseDraining         // DRAINING everywhere; its clients still send
	phaseStopped          // its clients have ended their sessions; until the pod has exited
	phases
)

var phaseNames = [phases]string{"before the delete", "delete until DRAINING on every Envoy", "DRAINING, its clients sending", "its clients stopped, until the pod exits"}

// drainClient is a client with its own cookie jar, the pod of its session and what its requests met.
type drainClient struct {
	http   *http.Client
	pinned string
	got    [phases]map[string]int
	failed []string
}

// drainGet sends one request and returns the pod that answered; a non-2xx answer is an error.
func drainGet(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("reading the body: %v", err)
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s (X-Backend %q)", resp.Status, resp.Header.Get("X-Backend"))
	}
	return resp.Header.Get("X-Backend"), nil
}

// drainingSessions is issue 45 on real pods: 200 cookie clients over the 3 pods of a Deployment, one pod
// deleted while its preStop hook keeps it terminating and serving for 60 s. Until it exits, every request of
// its clients still reaches it, no new client (a fresh cookie jar) reaches it once every Envoy holds it
// DRAINING, and no request of anyone fails; when its clients end their sessions, its request rate in the
// policy's status.backends[].perEndpoint falls to 0 while it is still terminating. The release's load status
// interval is lowered to 5 s for it (the chart's extraArgs; 1m by default) and put back after.
func (c *cluster) drainingSessions(t *testing.T) {
	start := time.Now()
	c.removeDrainSetup(t)
	c.must(t, drainSetup, "apply", "-f", "-")
	// Not waited for: the pods' preStop hook keeps them a minute, and the next run waits for them.
	c.cleanup(t, func() { c.run(drainSetup, "delete", "-f", "-", "--ignore-not-found", "--wait=false") })
	c.helmRun(t, "upgrade", release, "charts/lbplane", "-n", namespace, "--reuse-values",
		"--set-json", `extraArgs=["--load-status-interval=5s"]`, "--wait", "--timeout", "5m")
	t.Cleanup(func() {
		c.helmRun(t, "upgrade", release, "charts/lbplane", "-n", namespace, "--reuse-values", "--set-json", "extraArgs=[]", "--wait", "--timeout", "5m")
	})
	t.Logf("helm upgrade (extraArgs: --load-status-interval=5s) done after %s", time.Since(start).Round(time.Second))
	c.must(t, "", "-n", "default", "rollout", "status", "deployment/drain-backend", "--timeout=180s")
	eventually(t, 2*time.Minute, "kubectl get lbp drain shows it Programmed", func() error {
		out, err := c.run("", "get", "lbp", "drain", "-o", `jsonpath={.status.conditions[?(@.type=="Programmed")].status}`)
		if err != nil || out != "True" {
			return fmt.Errorf("Programmed=%q %v", out, err)
		}
		return nil
	})
	var nodePort string
	eventually(t, time.Minute, "the Envoy Service has a NodePort for port 10092", func() error {
		out, err := c.run("", "-n", namespace, "get", "service", release+"-envoy", "-o", `jsonpath={.spec.ports[?(@.port==10092)].nodePort}`)
		if nodePort = strings.TrimSpace(out); err != nil || nodePort == "" {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	url := fmt.Sprintf("http://%s:%s/", c.nodeAddress(t), nodePort)
	transport := &http.Transport{MaxIdleConns: 400, MaxIdleConnsPerHost: 400, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	newClient := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Transport: transport, Timeout: 5 * time.Second}
	}
	pods := map[string]bool{}
	eventually(t, 2*time.Minute, url+" is answered by the 3 pods, every Envoy reporting them healthy", func() error {
		out, err := c.run("", "get", "lbp", "drain", "-o", `jsonpath={.status.backends[0].endpoints.healthy}`)
		if err != nil || out != "3" {
			return fmt.Errorf("status.backends[0].endpoints.healthy %q %v", out, err)
		}
		for range 30 {
			b, err := drainGet(newClient(), url)
			if err != nil {
				return err
			}
			pods[b] = true
		}
		if len(pods) != 3 {
			return fmt.Errorf("answered by %v", pods)
		}
		return nil
	})

	// 200 clients, each with its own cookie jar and the session its first request got.
	const n = 200
	clients := make([]*drainClient, n)
	first := map[string]int{}
	for i := range clients {
		dc := &drainClient{http: newClient()}
		for p := range dc.got {
			dc.got[p] = map[string]int{}
		}
		b, err := drainGet(dc.http, url)
		if err != nil {
			t.Fatalf("new client %d: %v", i, err)
		}
		dc.pinned = b
		first[b]++
		clients[i] = dc
	}
	if len(first) != 3 {
		t.Fatalf("%d new clients were balanced onto %v only", n, first)
	}
	names := make([]string, 0, 3)
	for p := range first {
		names = append(names, p)
	}
	sort.Strings(names)
	victim := names[0]
	ip := strings.TrimSpace(c.must(t, "", "-n", "default", "get", "pod", victim, "-o", "jsonpath={.status.podIP}"))
	addr := ip + ":8080"
	t.Logf("%d clients over the pods %v; %s (%s) will be deleted", n, first, victim, addr)

	// Every client sends a request every 500 ms (at most 1,000 each: 500 s); one more client, new each time,
	// every 100 ms. A phase changes only while no request is under way (the write lock).
	var mu sync.RWMutex
	phase := phaseBefore
	setPhase := func(p int) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}
	stop, stopVictims := make(chan struct{}), make(chan struct{})
	var wg, victims sync.WaitGroup
	for _, dc := range clients {
		own := &wg
		var end <-chan struct{} = stop
		if dc.pinned == victim {
			own, end = &victims, stopVictims
		}
		own.Add(1)
		go func() {
			defer own.Done()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for range 1000 {
				select {
				case <-stop:
					return
				case <-end:
					return
				case <-tick.C:
				}
				mu.RLock()
				b, err := drainGet(dc.http, url)
				if err != nil {
					dc.failed = append(dc.failed, fmt.Sprintf("%s: %v", phaseNames[phase], err))
				} else {
					dc.got[phase][b]++
				}
				mu.RUnlock()
			}
		}()
	}
	var fresh [phases]map[string]int
	for p := range fresh {
		fresh[p] = map[string]int{}
	}
	var freshFailed []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range 5000 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.RLock()
			b, err := drainGet(newClient(), url)
			if err != nil {
				freshFailed = append(freshFailed, fmt.Sprintf("%s: %v", phaseNames[phase], err))
			} else {
				fresh[phase][b]++
			}
			mu.RUnlock()
		}
	}()
	stopped := false
	stopAll := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
			victims.Wait()
		}
	}
	defer stopAll()
	// waitAnswers waits until each client for which which is true has had k answers (or failures) in phase p.
	waitAnswers := func(p, k int, which func(*drainClient) bool) {
		t.Helper()
		eventually(t, time.Minute, fmt.Sprintf("the clients have %d answers each (%s)", k, phaseNames[p]), func() error {
			mu.Lock()
			defer mu.Unlock()
			for i, dc := range clients {
				sum := len(dc.failed)
				for _, v := range dc.got[p] {
					sum += v
				}
				if which(dc) && sum < k {
					return fmt.Errorf("client %d has %d", i, sum)
				}
			}
			return nil
		})
	}
	all := func(*drainClient) bool { return true }
	onVictim := func(dc *drainClient) bool { return dc.pinned == victim }

	// The endpoint's figures in status, read with kubectl as a user would: template's {field}s are the
	// endpoint's fields.
	endpoint := func(template string) (string, error) {
		sel := fmt.Sprintf(`{.status.backends[0].perEndpoint[?(@.address=="%s")].`, addr)
		out, err := c.run("", "get", "lbp", "drain", "-o", "jsonpath="+strings.ReplaceAll(template, "{", sel))
		if err != nil {
			return "", fmt.Errorf("%v %s", err, out)
		}
		return strings.TrimSpace(out), nil
	}
	rate := func() (float64, string, error) {
		out, err := endpoint("{requestsPerSecond}")
		if err != nil {
			return 0, out, err
		}
		r, err := strconv.ParseFloat(out, 64)
		return r, out, err
	}
	waitAnswers(phaseBefore, 4, all)
	eventually(t, time.Minute, "status shows requests to "+addr, func() error {
		if r, out, err := rate(); err != nil || r <= 0 {
			return fmt.Errorf("requestsPerSecond %q %v", out, err)
		}
		return nil
	})
	before, _ := endpoint("{requestsPerSecond}/s, {requests} requests in the window")
	t.Logf("status of %s before the delete: %s", addr, before)

	deleted := time.Now()
	c.must(t, "", "-n", "default", "delete", "pod", victim, "--wait=false")
	setPhase(phasePropagate)
	since := func() string { return time.Since(deleted).Round(100 * time.Millisecond).String() }
	eventually(t, 30*time.Second, "the EndpointSlice has "+victim+" terminating and serving", func() error {
		out, err := c.run("", "-n", "default", "get", "endpointslices", "-l", "kubernetes.io/service-name=drain-backend", "-o",
			`jsonpath={range .items[*].endpoints[*]}{.targetRef.name} serving={.conditions.serving} terminating={.conditions.terminating}{"\n"}{end}`)
		if err != nil || !strings.Contains(out, victim+" serving=true terminating=true") {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	t.Logf("+%s: the EndpointSlice has %s terminating and serving", since(), victim)
	eventually(t, 30*time.Second, "status says every Envoy holds "+addr+" DRAINING", func() error {
		out, err := endpoint("{reasons} {ejectedOn} {reportedBy}")
		f := strings.Fields(out)
		if err != nil || len(f) != 3 || !strings.Contains(f[0], "draining") || f[1] != f[2] {
			return fmt.Errorf("reasons, ejectedOn, reportedBy: %q %v", out, err)
		}
		return nil
	})
	setPhase(phaseDraining)
	t.Logf("+%s: status says every Envoy holds %s DRAINING: %s", since(), addr, must(endpoint("{reasons}, on {ejectedOn} of {reportedBy} Envoys")))

	// Its clients keep sending for 10 requests each, then end their sessions.
	waitAnswers(phaseDraining, 10, onVictim)
	close(stopVictims)
	victims.Wait()
	setPhase(phaseStopped)
	t.Logf("+%s: the clients of %s stopped", since(), victim)
	var zero string
	eventually(t, 45*time.Second, "status shows no request to "+addr, func() error {
		r, out, err := rate()
		if err != nil || r != 0 {
			return fmt.Errorf("requestsPerSecond %q %v", out, err)
		}
		zero = must(endpoint("{requestsPerSecond}/s ({requests} requests in the window), {reasons}"))
		return nil
	})
	// Read after the status: the pod had not exited when the status showed 0.
	ts, err := c.run("", "-n", "default", "get", "pod", victim, "-o", "jsonpath={.metadata.deletionTimestamp}")
	if err != nil || strings.TrimSpace(ts) == "" {
		t.Fatalf("+%s: %s had exited (or was not terminating) by the time status showed its rate at 0: %q %v", since(), victim, ts, err)
	}
	t.Logf("+%s: status of %s: %s; the pod is still terminating", since(), addr, zero)
	waitAnswers(phaseStopped, 4, func(dc *drainClient) bool { return !onVictim(dc) })
	if out, err := c.run("", "-n", "default", "wait", "--for=delete", "pod/"+victim, "--timeout=120s"); err != nil {
		t.Fatalf("%s did not exit: %v\n%s", victim, err, out)
	}
	t.Logf("+%s: %s has exited", since(), victim)
	stopAll()

	// What the clients met.
	var failed []string
	var victimAnswers, otherAnswers int
	for i, dc := range clients {
		for _, f := range dc.failed {
			failed = append(failed, fmt.Sprintf("client %d (session on %s): %s", i, dc.pinned, f))
		}
		for p := range phases {
			for b, k := range dc.got[p] {
				if b != dc.pinned {
					t.Errorf("client %d, whose session is on %s, was answered %d times by %s %s", i, dc.pinned, k, b, phaseNames[p])
				}
				if dc.pinned == victim {
					victimAnswers += k
				} else {
					otherAnswers += k
				}
			}
		}
		if dc.pinned == victim && len(dc.got[phaseStopped]) > 0 {
			t.Errorf("client %d sent requests after its session ended: %v", i, dc.got[phaseStopped])
		}
	}
	for _, f := range freshFailed {
		failed = append(failed, "a new client: "+f)
	}
	if len(failed) > 0 {
		t.Errorf("%d requests failed:\n%s", len(failed), strings.Join(failed[:min(len(failed), 20)], "\n"))
	}
	for _, p := range []int{phaseDraining, phaseStopped} {
		if fresh[p][victim] > 0 {
			t.Errorf("%d new clients reached %s %s (of %v)", fresh[p][victim], victim, phaseNames[p], fresh[p])
		}
	}
	newWhileDraining := 0
	for _, p := range []int{phaseDraining, phaseStopped} {
		for _, k := range fresh[p] {
			newWhileDraining += k
		}
	}
	if newWhileDraining == 0 {
		t.Errorf("no new client was answered while %s drained", victim)
	}
	for p := range phases {
		t.Logf("new clients %s: %v", phaseNames[p], fresh[p])
	}
	t.Logf("%d clients on %s: %d answers, all by it; %d clients on the 2 other pods: %d answers, all by their pod; %d requests failed; %s",
		first[victim], victim, victimAnswers, n-first[victim], otherAnswers, len(failed), time.Since(start).Round(time.Second))
}

// removeDrainSetup removes what an earlier drainingSessions left, and waits until its pods are gone: a
// terminating pod would be in this run's EndpointSlice. Their preStop hook keeps them 60 s (the kubelet
// runs it to its end even when a pod is deleted again with a shorter grace period).
func (c *cluster) removeDrainSetup(t *testing.T) {
	t.Helper()
	c.run(drainSetup, "delete", "-f", "-", "--ignore-not-found", "--wait=false")
	eventually(t, 2*time.Minute, "the pods of deployment/drain-backend are gone", func() error {
		out, err := c.run("", "-n", "default", "get", "pods", "-l", "app=drain-backend", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	})
}

// must returns s, or the error's text: for log lines.
func must(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	return s
}
