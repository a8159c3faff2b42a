//go:build cluster

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"
)

// The k6 Job: constant-arrival-rate load on one target, its summary as one JSON line in the pod's log.
const k6Script = `import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  scenarios: { steady: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
    duration: __ENV.DURATION, preAllocatedVUs: Number(__ENV.VUS), maxVUs: Number(__ENV.VUS) * 4 } },
  summaryTrendStats: ['avg', 'p(50)', 'p(90)', 'p(99)', 'p(99.9)', 'max'],
};
export default function () { http.get(__ENV.TARGET); }
export function handleSummary(data) {
  const m = data.metrics, d = m.http_req_duration.values;
  const dropped = m.dropped_iterations ? m.dropped_iterations.values.count : 0;
  return { stdout: JSON.stringify({ qps: m.http_reqs.values.rate, requests: m.http_reqs.values.count,
    failed: m.http_req_failed.values.passes, dropped: dropped,
    p50: d['p(50)'], p90: d['p(90)'], p99: d['p(99)'], p999: d['p(99.9)'], max: d.max }) + '\n' };
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
      maxconn 20000
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

// k6Result is the summary line of the k6 Job.
type k6Result struct {
	Target                   string  `json:"target"`
	QPS                      float64 `json:"qps"`
	Requests                 float64 `json:"requests"`
	Failed                   float64 `json:"failed"`
	Dropped                  float64 `json:"dropped"`
	P50, P90, P99, P999, Max float64
}

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
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, `{"qps"`) {
			var r k6Result
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("k6 summary %q: %v", l, err)
			}
			r.Target = j.target
			c.run("", "-n", "default", "delete", "job", name, "--wait=false")
			return r
		}
	}
	t.Fatalf("no summary line in the k6 Job's log:\n%s", logs)
	return k6Result{}
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

// k6Comparison runs the same k6 Job through the chart's Envoy, nginx and HAProxy, each in front of the same
// three backend pods. LBPLANE_CLUSTER_K6_RATE (requests per second, default 50) and
// LBPLANE_CLUSTER_K6_DURATION (default 5s) set the load; LBPLANE_CLUSTER_BENCH_DIR, when set, is where the
// report (REPORT.md, results.json) is written.
func (c *cluster) k6Comparison(t *testing.T) {
	rate := 50
	if v := os.Getenv("LBPLANE_CLUSTER_K6_RATE"); v != "" {
		if _, err := fmt.Sscan(v, &rate); err != nil || rate <= 0 {
			t.Fatalf("LBPLANE_CLUSTER_K6_RATE=%q: want a positive number of requests per second", v)
		}
	}
	duration := env("LBPLANE_CLUSTER_K6_DURATION", "5s")
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
	targets := []struct{ name, url string }{
		{"lbplane (Envoy)", fmt.Sprintf("http://%s-envoy.%s.svc.cluster.local/", release, namespace)},
		{"nginx", "http://nginx.default.svc.cluster.local/"},
		{"haproxy", "http://haproxy.default.svc.cluster.local/"},
	}
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
		writeReport(t, dir, rate, duration, results)
	}
}

func writeReport(t *testing.T, dir string, rate int, duration string, results []k6Result) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(map[string]any{"rate": rate, "duration": duration, "results": results}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	var r strings.Builder
	fmt.Fprintf(&r, "# k6 in the cluster: Envoy fed by lbplane, nginx and HAProxy in front of the same backends\n\n")
	fmt.Fprintf(&r, "Question: with the chart installed as users install it, on real pods, what QPS and tail latency does a\n")
	fmt.Fprintf(&r, "k6 Job measure through the Envoy Service, and how do nginx and HAProxy pods in front of the same three\n")
	fmt.Fprintf(&r, "backend pods compare under the same constant-arrival-rate load?\n\n")
	fmt.Fprintf(&r, "- Machine: %s, %d cores (%s), %s\n", host, runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&r, "- Cluster: the one-node cluster of `make cluster` (hack/cluster), every pod on this machine\n")
	fmt.Fprintf(&r, "- Command: `LBPLANE_CLUSTER_K6_RATE=%d LBPLANE_CLUSTER_K6_DURATION=%s LBPLANE_CLUSTER_BENCH_DIR=%s make test-cluster`\n", rate, duration, dir)
	fmt.Fprintf(&r, "- Load: k6 constant-arrival-rate, %d requests per second for %s, one Job per target\n\n", rate, duration)
	fmt.Fprintf(&r, "| target | QPS | p50 ms | p90 ms | p99 ms | p99.9 ms | failed | dropped |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range results {
		fmt.Fprintf(&r, "| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f of %.0f | %.0f |\n", x.Target, x.QPS, x.P50, x.P90, x.P99, x.P999, x.Failed, x.Requests, x.Dropped)
	}
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s", dir)
}
