//go:build cluster

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/lbplane/lbplane/internal/tools"
)

// The k6 Job: constant-arrival-rate load on one target, its summary as one JSON line in the pod's log.
const k6Script = `import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  scenarios: { steady: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
    duration: __ENV.DURATION, preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS) * 4 } },
  summaryTrendStats: ['avg', 'p(50)', 'p(90)', 'p(99)', 'p(99.9)', 'max'],
};
// Each failed request on one line of the log (at most a few under the faults' low rates): what went wrong.
export default function () {
  const res = http.get(__ENV.TARGET);
  if (res.status !== 200) {
    console.warn('failed request: status ' + res.status + (res.error ? ': ' + res.error : ''));
  }
}
export function handleSummary(data) {
  const m = data.metrics, d = m.http_req_duration.values;
  const dropped = m.dropped_iterations ? m.dropped_iterations.values.count : 0;
  // Two lines: the figures the test reads, then k6's whole summary (kept in the bench report).
  return { stdout: JSON.stringify({ qps: m.http_reqs.values.rate, requests: m.http_reqs.values.count,
    failed: m.http_req_failed.values.passes, dropped: dropped,
    p50: d['p(50)'], p90: d['p(90)'], p99: d['p(99)'], p999: d['p(99.9)'], max: d.max }) + '\n' +
    JSON.stringify({ k6_summary: data }) + '\n' };
}
`

const k6JobTemplate = `apiVersion: batch/v1
kind: Job
metadata: {name: {{.Name}}, namespace: default}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, runAsUser: 12345}
      containers:
        - name: k6
          image: {{.Image}}
          imagePullPolicy: Never
          args: [run, --quiet, --no-usage-report, /scripts/test.js]
          env:
            - {name: TARGET, value: "{{.Target}}"}
            - {name: RATE, value: "{{.Rate}}"}
            - {name: DURATION, value: "{{.Duration}}"}
            - {name: VUS, value: "{{.VUs}}"}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: script, mountPath: /scripts}, {name: tmp, mountPath: /tmp}]
      volumes: [{name: script, configMap: {name: k6-script}}, {name: tmp, emptyDir: {}}]
`

// The peers: nginx and HAProxy as pods in front of the same backend pods, least-request balancing like the
// policy's, keep-alive to the backends.
const peers = `apiVersion: v1
kind: ConfigMap
metadata: {name: peers, namespace: default}
data:
  nginx.conf: |
    worker_processes auto;
    pid /tmp/nginx.pid;
    error_log stderr warn;
    events { worker_connections 8192; }
    http {
      access_log off;
      client_body_temp_path /tmp/body; proxy_temp_path /tmp/proxy; fastcgi_temp_path /tmp/fastcgi;
      uwsgi_temp_path /tmp/uwsgi; scgi_temp_path /tmp/scgi;
      upstream backends {
        least_conn;
        {{- range .}}
        server {{.}}:8080;
        {{- end}}
        keepalive 64;
      }
      server {
        listen 8080;
        location / { proxy_pass http://backends; proxy_http_version 1.1; proxy_set_header Connection ""; }
      }
    }
  haproxy.cfg: |
    global
      # As nginx's worker_connections: HAProxy needs two descriptors a connection, and refuses to start
      # when the open-file limit (20000 for containerd's containers here) is below what maxconn needs.
      maxconn 8192
    defaults
      mode http
      timeout connect 5s
      timeout client 30s
      timeout server 30s
      http-reuse always
    frontend web
      bind :8080
      default_backend backends
    backend backends
      balance leastconn
      {{- range $i, $ip := .}}
      server b{{$i}} {{$ip}}:8080
      {{- end}}
`

const peerDeployment = `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: {{.Name}}, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{.Name}}}}
  template:
    metadata: {labels: {app: {{.Name}}}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: {{.Name}}
          image: {{.Image}}
          imagePullPolicy: Never
          args: [{{.Args}}]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {tcpSocket: {port: http}, periodSeconds: 2}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: config, mountPath: /etc/peer}, {name: tmp, mountPath: /tmp}]
      volumes: [{name: config, configMap: {name: peers}}, {name: tmp, emptyDir: {}}]
---
apiVersion: v1
kind: Service
metadata: {name: {{.Name}}, namespace: default}
spec:
  selector: {app: {{.Name}}}
  ports: [{name: http, port: 80, targetPort: http}]
`

func render(t *testing.T, text string, data any) string {
	t.Helper()
	tmpl := template.Must(template.New("").Parse(text))
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// k6Result is the summary line of the k6 Job (milliseconds), and k6's whole summary (Raw).
type k6Result struct {
	Target                   string  `json:"target"`
	QPS                      float64 `json:"qps"`
	Requests                 float64 `json:"requests"`
	Failed                   float64 `json:"failed"`
	Dropped                  float64 `json:"dropped"`
	P50, P90, P99, P999, Max float64
	Raw                      json.RawMessage `json:"-"`
	// Errors counts the failed requests by what k6 saw (status, error).
	Errors map[string]int `json:"errors,omitempty"`
}

// k6FailedRequest is the message the k6 script logs for each failed request, in k6's logfmt.
var k6FailedRequest = regexp.MustCompile(`msg="failed request: ((?:[^"\\]|\\.)*)"`)

// k6 runs the k6 Job against target and returns its summary.
func (c *cluster) k6(t *testing.T, target string, rate int, duration string) k6Result {
	t.Helper()
	return c.startK6(t, target, rate, duration).wait(t)
}

type k6Job struct {
	c            *cluster
	name, target string
	duration     time.Duration
}

// startK6 starts the k6 Job against target (the k6-script ConfigMap must exist).
func (c *cluster) startK6(t *testing.T, target string, rate int, duration string) *k6Job {
	t.Helper()
	name := "k6-" + strings.NewReplacer(".", "-", ":", "-", "/", "").Replace(strings.TrimPrefix(target, "http://"))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-")
	c.run("", "-n", "default", "delete", "job", name, "--ignore-not-found", "--wait=true")
	job := render(t, k6JobTemplate, map[string]any{"Name": name, "Image": env("LBPLANE_CLUSTER_K6_IMAGE", "lbplane.local/k6:dev"),
		"Target": target, "Rate": rate, "Duration": duration, "VUs": max(10, rate/20)})
	c.must(t, job, "apply", "-f", "-")
	d, err := time.ParseDuration(duration)
	if err != nil {
		t.Fatalf("k6 duration %q: %v", duration, err)
	}
	return &k6Job{c: c, name: name, target: target, duration: d}
}

// wait waits for the Job to complete and returns its summary.
func (j *k6Job) wait(t *testing.T) k6Result {
	t.Helper()
	c, name := j.c, j.name
	timeout := fmt.Sprintf("--timeout=%ds", int(j.duration.Seconds())+180)
	if out, err := c.run("", "-n", "default", "wait", "--for=condition=Complete", "job/"+name, timeout); err != nil {
		logs, _ := c.run("", "-n", "default", "logs", "job/"+name, "--tail=50")
		t.Fatalf("k6 Job %s did not complete: %v %s\n%s", name, err, out, logs)
	}
	logs := c.must(t, "", "-n", "default", "logs", "job/"+name)
	var r k6Result
	found := false
	for _, l := range strings.Split(logs, "\n") {
		switch {
		case strings.HasPrefix(l, `{"qps"`):
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("k6 summary %q: %v", l, err)
			}
			found = true
		case k6FailedRequest.MatchString(l):
			if r.Errors == nil {
				r.Errors = map[string]int{}
			}
			r.Errors[strings.ReplaceAll(k6FailedRequest.FindStringSubmatch(l)[1], `\"`, `"`)]++
		case strings.HasPrefix(l, `{"k6_summary"`):
			var raw struct {
				Summary json.RawMessage `json:"k6_summary"`
			}
			if err := json.Unmarshal([]byte(l), &raw); err != nil {
				t.Fatalf("k6's whole summary: %v", err)
			}
			r.Raw = raw.Summary
		}
	}
	if !found || r.Raw == nil {
		t.Fatalf("no summary lines in the k6 Job's log:\n%s", logs)
	}
	r.Target = j.target
	c.run("", "-n", "default", "delete", "job", name, "--wait=false")
	return r
}

// k6Script applies the k6-script ConfigMap the k6 Jobs run.
func (c *cluster) k6Script(t *testing.T) {
	t.Helper()
	cm := c.must(t, k6Script, "-n", "default", "create", "configmap", "k6-script", "--from-file=test.js=/dev/stdin", "--dry-run=client", "-o", "yaml")
	c.must(t, cm, "apply", "-f", "-")
}

// backendIPs are the ready pod addresses of the demo-backend Service.
func (c *cluster) backendIPs(t *testing.T) []string {
	out := c.must(t, "", "-n", "default", "get", "endpointslices", "-l", "kubernetes.io/service-name=demo-backend", "-o",
		`jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}`)
	ips := strings.Fields(out)
	sort.Strings(ips)
	if len(ips) != 3 {
		t.Fatalf("want 3 ready backend pods, have %v", ips)
	}
	return ips
}

// k6Load is the load of the k6 comparison: LBPLANE_CLUSTER_K6_RATE requests per second (default 50) for
// LBPLANE_CLUSTER_K6_DURATION (default 5s). The defaults check that the path works; the comparison itself
// wants an idle machine and a higher rate.
func k6Load(t *testing.T) (int, string) {
	rate := 50
	if v := os.Getenv("LBPLANE_CLUSTER_K6_RATE"); v != "" {
		if _, err := fmt.Sscan(v, &rate); err != nil || rate <= 0 {
			t.Fatalf("LBPLANE_CLUSTER_K6_RATE=%q: want a positive number of requests per second", v)
		}
	}
	duration := env("LBPLANE_CLUSTER_K6_DURATION", "5s")
	if d, err := time.ParseDuration(duration); err != nil || d < time.Second {
		t.Fatalf("LBPLANE_CLUSTER_K6_DURATION=%q: want a Go duration of at least 1s, e.g. 5s or 2m", duration)
	}
	return rate, duration
}

// k6Comparison runs the same k6 Job through the chart's Envoy, nginx and HAProxy, each in front of the same
// three backend pods, one after the other. LBPLANE_CLUSTER_BENCH_DIR, when set, is where the report
// (REPORT.md, results.json, each target's whole k6 summary) is written; a relative path is taken from the
// repository's root.
func (c *cluster) k6Comparison(t *testing.T) {
	rate, duration := k6Load(t)
	c.k6Script(t)
	ips := c.backendIPs(t)
	manifests := render(t, peers, ips) +
		render(t, peerDeployment, map[string]string{"Name": "nginx", "Image": env("LBPLANE_CLUSTER_NGINX_IMAGE", "lbplane.local/nginx:dev"),
			"Args": `-c, /etc/peer/nginx.conf, -e, stderr, -g, "daemon off;"`}) +
		render(t, peerDeployment, map[string]string{"Name": "haproxy", "Image": env("LBPLANE_CLUSTER_HAPROXY_IMAGE", "lbplane.local/haproxy:dev"),
			"Args": `-f, /etc/peer/haproxy.cfg, -db`})
	c.must(t, manifests, "apply", "-f", "-")
	c.cleanup(t, func() { c.run(manifests, "delete", "-f", "-", "--wait=false") })
	for _, d := range []string{"nginx", "haproxy"} {
		c.must(t, "", "-n", "default", "wait", "--for=condition=Available", "deployment/"+d, "--timeout=120s")
	}
	targets := []struct{ name, file, url string }{
		{"lbplane (Envoy)", "envoy", fmt.Sprintf("http://%s-envoy.%s.svc.cluster.local/", release, namespace)},
		{"nginx", "nginx", "http://nginx.default.svc.cluster.local/"},
		{"haproxy", "haproxy", "http://haproxy.default.svc.cluster.local/"},
	}
	loadBefore := loadAverage()
	start := time.Now()
	var results []k6Result
	for _, tg := range targets {
		r := c.k6(t, tg.url, rate, duration)
		r.Target = tg.name
		t.Logf("%-16s %8.0f req/s  p50 %6.2f ms  p90 %6.2f ms  p99 %6.2f ms  p99.9 %6.2f ms  failed %.0f of %.0f, dropped %.0f",
			tg.name, r.QPS, r.P50, r.P90, r.P99, r.P999, r.Failed, r.Requests, r.Dropped)
		if r.Requests == 0 || r.Failed > 0 {
			t.Errorf("%s: %.0f of %.0f requests failed", tg.name, r.Failed, r.Requests)
		}
		results = append(results, r)
	}
	if dir := os.Getenv("LBPLANE_CLUSTER_BENCH_DIR"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(c.root, dir)
		}
		rep := k6Report{Rate: rate, Duration: duration, Start: start, End: time.Now(), LoadBefore: loadBefore, LoadAfter: loadAverage()}
		for i, r := range results {
			rep.Results = append(rep.Results, r)
			rep.files = append(rep.files, "k6-"+targets[i].file+".json")
		}
		rep.write(t, dir)
	}
}

// loadAverage is the machine's 1, 5 and 15 minute load averages (the cluster shares the machine).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// machine describes this machine for the report: CPU model, cores, memory, kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s, %d cores%s, Linux %s (%s/%s)", model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.GOOS, runtime.GOARCH)
}

type k6Report struct {
	Rate                  int        `json:"rate"`
	Duration              string     `json:"duration"`
	Start, End            time.Time  `json:"-"`
	LoadBefore, LoadAfter string     `json:"-"`
	Results               []k6Result `json:"results"`
	files                 []string
}

func (rep k6Report) write(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON("results.json", map[string]any{"rate": rep.Rate, "duration": rep.Duration, "machine": machine(),
		"start": rep.Start.UTC(), "end": rep.End.UTC(), "load_before": rep.LoadBefore, "load_after": rep.LoadAfter, "results": rep.Results})
	for i, r := range rep.Results {
		writeJSON(rep.files[i], r.Raw)
	}
	rel, err := filepath.Rel(tools.RepoRoot(), dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = dir
	}
	var r strings.Builder
	fmt.Fprintf(&r, "# k6 in the cluster: Envoy fed by lbplane, nginx and HAProxy in front of the same backend pods\n\n")
	fmt.Fprintf(&r, "**Question:** with the chart installed as users install it, on real pods, what QPS and tail latency\n")
	fmt.Fprintf(&r, "does a k6 Job in the cluster measure through the Envoy Service, and how do nginx and HAProxy pods in\n")
	fmt.Fprintf(&r, "front of the same three backend pods compare under the same constant-arrival-rate load?\n\n")
	fmt.Fprintf(&r, "- **Machine:** %s; load average %s before the runs, %s after (the cluster's own components run beside the target)\n", machine(), rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(&r, "- **When:** %s to %s UTC\n", rep.Start.UTC().Format("2006-01-02 15:04:05"), rep.End.UTC().Format("15:04:05"))
	fmt.Fprintf(&r, "- **Cluster:** the one-node cluster of `make cluster` (hack/cluster, docs/kubernetes.md): every pod, k6\n")
	fmt.Fprintf(&r, "  included, on this machine; Services through kube-proxy (nftables); the chart with its default values\n")
	fmt.Fprintf(&r, "  (2 Envoys, 2 lbplane replicas); nginx and HAProxy one pod each (all their workers: nginx\n")
	fmt.Fprintf(&r, "  `worker_processes auto`, HAProxy one thread per core; Envoy one worker per core), least-request /\n")
	fmt.Fprintf(&r, "  least-connection balancing with keep-alive to the backends; 1 KiB responses from `lbplane-backend`\n")
	fmt.Fprintf(&r, "- **Command** (after `sudo make cluster`; `make test-cluster` with the same variables runs this within\n")
	fmt.Fprintf(&r, "  the whole test, starting and stopping the cluster):\n\n  ```sh\n  KUBECONFIG=$(hack/cluster/cluster.sh kubeconfig) LBPLANE_CLUSTER_K6_RATE=%d LBPLANE_CLUSTER_K6_DURATION=%s \\\n", rep.Rate, rep.Duration)
	fmt.Fprintf(&r, "    LBPLANE_CLUSTER_BENCH_DIR=%s go test -tags cluster -count=1 -v -run 'TestCluster/k6$' ./e2e/cluster\n  ```\n\n", rel)
	fmt.Fprintf(&r, "- **Load:** k6 constant-arrival-rate, %d requests per second for %s, one k6 Job per target, one\n", rep.Rate, rep.Duration)
	fmt.Fprintf(&r, "  target after the other, each through its Service's cluster DNS name and ClusterIP\n\n")
	fmt.Fprintf(&r, "| target | QPS | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | failed | dropped |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range rep.Results {
		fmt.Fprintf(&r, "| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f of %.0f | %.0f |\n", x.Target, x.QPS, x.P50, x.P90, x.P99, x.P999, x.Max, x.Failed, x.Requests, x.Dropped)
	}
	fmt.Fprintf(&r, "\nQPS is what k6 completed per second over the run (the offered rate when nothing is dropped); \"dropped\"\n")
	fmt.Fprintf(&r, "counts iterations k6 could not start on time for lack of a free VU. `results.json` has these figures;\n")
	fmt.Fprintf(&r, "%s hold each run's whole k6 summary.\n", "`"+strings.Join(rep.files, "`, `")+"`")
	if n := rep.Results[0].Requests; n < 10000 {
		fmt.Fprintf(&r, "\n**Reading it.** About %.0f requests a target: p99.9 is the slowest one or two of them, and on a shared\n", n)
		fmt.Fprintf(&r, "machine the tail is mostly the scheduling of the other load. A run this short shows that the Job and all\n")
		fmt.Fprintf(&r, "three paths work and answer every request; it ranks nothing. The comparison wants an idle machine, a\n")
		fmt.Fprintf(&r, "rate well above this and a minute or more per target (the command above with a higher\n")
		fmt.Fprintf(&r, "`LBPLANE_CLUSTER_K6_RATE` and `LBPLANE_CLUSTER_K6_DURATION`).\n")
	} else {
		fmt.Fprintf(&r, "\n**Reading it.** k6, the target, the three backends, kube-proxy and the node's own components share\n")
		fmt.Fprintf(&r, "the machine's cores, so compare the targets within this table rather than with figures from elsewhere;\n")
		fmt.Fprintf(&r, "the targets run one after the other against the same backend pods.\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s", dir)
}
