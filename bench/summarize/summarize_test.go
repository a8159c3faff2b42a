package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReportsMatchRawResults fails when a table between summary markers in a bench/results report differs
// from what its raw files render (run go run ./bench/summarize -w), or when a report whose raw results
// support a generated table has none.
func TestReportsMatchRawResults(t *testing.T) {
	reports, err := findReports(filepath.Join("..", "results"))
	if err != nil {
		t.Fatal(err)
	}
	// Every report is one or the other: its summary tables are generated from its raw files (at least one),
	// or it keeps no raw results a table could come from (the stress check, the predictions benchmark and the
	// metrics scrape benchmark keep only go test's lines).
	noRaw := map[string]bool{"2026-11-23-vm-stress": true, "2026-11-29-vm-predict": true, "2026-12-01-metrics-scrape": true, "2026-12-01-metrics-scrape-clusters": true}
	// Or its whole report is written by the run that made it, from the raw files beside it: the cluster test
	// (e2e/cluster) from k6's summaries, the A/B script from benchstat's output, the stats row's from its
	// runs.jsonl (three rows), the rollout row's (-only rollout) from summary.json and rollout/*.json.
	writtenByRun := map[string]bool{"2026-11-27-cluster": true, "2026-11-27-assembler-ab": true, "2026-11-30-identity-ab": true, "2026-11-27-vm-stats": true,
		"2026-11-27-vm-rollout": true}
	generated := map[string]bool{
		"2026-11-21-vm":                true,
		"2026-11-21-vm-ab":             true,
		"2026-11-21-vm-health-haproxy": true,
		"2026-11-23-vm-incremental":    true,
		"2026-11-23-vm-balancing":      true,
		"2026-11-23-vm-edge":           true,
		"2026-11-27-vm-ha":             true,
		"2026-12-01-vm-grpc-fleet":     true,
		"2026-11-30-vm-gateway-routes": true,
		"2026-11-30-vm-endpoint-storm": true,
		"2026-11-30-vm-fleet":          true,
	}
	for _, path := range reports {
		old, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		updated, tables, err := render(path, string(old))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		name := filepath.Base(filepath.Dir(path))
		if !generated[name] && !noRaw[name] && !writtenByRun[name] {
			t.Errorf("%s: a new report: generate its summary tables from its raw files (bench/summarize) and list it here, or list it as keeping none", path)
		}
		if len(tables) == 0 && generated[name] {
			t.Errorf("%s: no generated summary table (<!-- summary:begin kind=… src=… -->)", path)
		}
		if updated != string(old) {
			t.Errorf("%s: a summary table differs from its raw results; run go run ./bench/summarize -w\n%s", path, firstDiff(string(old), updated))
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  report:   " + al[i] + "\n  rendered: " + bl[i]
		}
	}
	return "the reports differ in length"
}

const churnRun = `{"scenario":"churn","peer":"lbplane","policies":1000,"api":"delta","p50Ms":19.732,"p99Ms":94.295,"valid":true,"samplesMs":[1,2],"lbplaneRssBytes":116584448,"lbplaneCpuMsPerChange":1.5447,"extra":{"achievedRate":100.0038,"envoyP50Ms":27.649,"envoyP99Ms":88.849,"lbplaneCoreShare":0.1545,"missing":0,"statusWrites":0,"watchP99Ms":17.794,"watchToEDSP99Ms":85.63,"writes":6001}}
`

func writeReport(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "churn"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "churn", "runs.jsonl"), []byte(churnRun), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "REPORT.md")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRenderRewritesOnlyBetweenMarkers(t *testing.T) {
	const begin = "<!-- summary:begin kind=churn src=churn/runs.jsonl -->\n"
	const end = "<!-- summary:end -->\n"
	stale := "# Churn\n\nBefore.\n\n" + begin + "| a stale table |\n" + end + "\nAfter.\n"
	path := writeReport(t, stale)
	got, tables, err := render(path, stale)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 {
		t.Fatalf("tables: got %d, want 1", len(tables))
	}
	want := "| churn | 1000 | 100.0 | 6001 | 19.7 / 94.3 | 27.6 / 88.8 | 17.8 | 85.6 | 1.54 | 15 % | 0 | 0 |\n"
	if !strings.Contains(got, want) {
		t.Errorf("rendered table lacks the run's row %q:\n%s", want, got)
	}
	if strings.Contains(got, "a stale table") {
		t.Errorf("the stale table was kept:\n%s", got)
	}
	if !strings.HasPrefix(got, "# Churn\n\nBefore.\n\n"+begin) || !strings.HasSuffix(got, end+"\nAfter.\n") {
		t.Errorf("text outside the markers changed:\n%s", got)
	}
	// Rendering the rendered report again changes nothing: that is what the check compares.
	again, _, err := render(path, got)
	if err != nil {
		t.Fatal(err)
	}
	if again != got {
		t.Errorf("a second render differs:\n%s\n---\n%s", got, again)
	}
	// One figure edited by hand is a difference.
	edited := strings.Replace(got, "| 19.7 / 94.3 |", "| 19.7 / 90.0 |", 1)
	if edited == got {
		t.Fatal("the edit did not apply")
	}
	if back, _, _ := render(path, edited); back == edited {
		t.Error("a hand-edited figure went unnoticed")
	}
}

func TestRenderRefusesBadMarkers(t *testing.T) {
	cases := map[string]string{
		"no end marker":    "<!-- summary:begin kind=churn src=churn/runs.jsonl -->\n| x |\n",
		"unknown kind":     "<!-- summary:begin kind=nope src=churn/runs.jsonl -->\n<!-- summary:end -->\n",
		"missing src file": "<!-- summary:begin kind=churn src=gone/runs.jsonl -->\n<!-- summary:end -->\n",
		"src outside":      "<!-- summary:begin kind=churn src=../churn/runs.jsonl -->\n<!-- summary:end -->\n",
		"no src":           "<!-- summary:begin kind=churn -->\n<!-- summary:end -->\n",
		"no rows":          "<!-- summary:begin kind=coldstart src=churn/runs.jsonl -->\n<!-- summary:end -->\n",
	}
	for name, body := range cases {
		path := writeReport(t, body)
		if _, _, err := render(path, body); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A run of the runner's -fanout-replicas row (300 clients over three replicas), cut to four samples.
const fanoutReplicasRun = `{"scenario":"fanout-replicas","peer":"lbplane","rep":0,"conns":300,"api":"delta","errors":0,"p50Ms":26.11789,"p99Ms":29.623222,"p999Ms":29.735419,"valid":true,"samplesMs":[26.674504,20.081084,29.623222,29.735419],"lbplaneRssBytes":175570944,"lbplaneCpuMsPerChange":49.99999999999997,"extra":{"acceptedMs":11.210627,"change":1,"connectSeconds":0.104070742,"connectionsLost":0,"firstAll":29.708295,"firstP50":26.115696,"got":300,"pinned":1,"r0:clients":100,"r0:connectedRSS":59162624,"r0:cpuMs":9.999999999999995,"r0:got":100,"r0:idleRSS":53919744,"r0:max":27.064254,"r0:p50":26.13412,"r0:p99":27.047964,"r0:rssPerClientKiB":51.2,"r0:streams":100,"r1:clients":100,"r1:connectedRSS":58011648,"r1:cpuMs":19.99999999999999,"r1:got":100,"r1:idleRSS":52375552,"r1:max":21.198405,"r1:p50":20.300477,"r1:p99":21.168881,"r1:rssPerClientKiB":55.04,"r1:streams":100,"r2:clients":100,"r2:connectedRSS":58396672,"r2:cpuMs":19.99999999999999,"r2:got":100,"r2:idleRSS":53022720,"r2:max":29.735419,"r2:p50":28.557564,"r2:p99":29.68838,"r2:rssPerClientKiB":52.48,"r2:streams":100,"ready":300,"replicas":3,"types":4,"via":0}}
`

func TestFanoutReplicasTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "replicas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "replicas", "runs.jsonl"), []byte(fanoutReplicasRun), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "<!-- summary:begin kind=fanout-replicas src=replicas/runs.jsonl -->\n<!-- summary:end -->\n"
	path := filepath.Join(dir, "REPORT.md")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := render(path, body)
	if err != nil {
		t.Fatal(err)
	}
	want := "| replicas | 300 | 3 | 1 (r0) | 26.1 / 29.6 / 29.7 | r0 27.0 / 27.1; r1 21.2 / 21.2; r2 29.7 / 29.7 | 50 | r0 51.2; r1 55.0; r2 52.5 | true |\n"
	if !strings.Contains(got, want) {
		t.Errorf("rendered table lacks the run's row %q:\n%s", want, got)
	}
}

// A smoke run of the runner's -only gateway-routes row (100 routes, 200 for memory), cut to what the tables read.
const gatewayRoutesRuns = `{"scenario":"gateway-routes","variant":"propagation","policies":100,"valid":true,"samplesMs":[25.684,19.635,16.37,32.836,15.386],"pushSamplesMs":[39.156,30.898,26.756,42.628,130.849],"lbplaneRssBytes":73023488,"lbplaneCpuMsPerChange":20,"extra":{"hostnames":30,"samplesWanted":5,"ownHostP50Ms":17.65,"ownHostP99Ms":25.684,"sharedHostP50Ms":15.6,"sharedHostP99Ms":32.836,"statusP50Ms":165.9,"statusP99Ms":1014.2}}
{"scenario":"gateway-routes","variant":"churn","policies":100,"requests":2399,"errors":0,"rps":199.9,"p50Ms":1.62,"p99Ms":7.53,"valid":true,"extra":{"seconds":10,"non2xx":0,"connectionErrors":0,"wrongRoute":0,"late":0,"added":25,"updated":50,"deleted":25,"apiErrors":0,"maxMs":25.44,"lbplaneCoreShare":0.08}}
{"scenario":"gateway-routes","variant":"update-under-load","policies":100,"requests":2399,"errors":3,"rps":199.9,"p50Ms":1.61,"p99Ms":12.44,"valid":false,"note":"interrupted","extra":{"seconds":10,"non2xx":3,"updated":100,"maxMs":36.47,"lbplaneCoreShare":0.09}}
{"scenario":"gateway-routes","variant":"memory","policies":200,"valid":true,"lbplaneRssBytes":79691776,"extra":{"hostnames":60,"createSeconds":1.8,"servedSeconds":1.9,"settledSeconds":5.8,"cpuToServedSeconds":0.3,"cpuToSettledSeconds":0.8,"idleRSS":62914560,"servedRSS":76546048,"rssPerRouteKiB":78,"envoyIdleRSS":68157440,"envoyRSS":80740352,"envoyCPUSeconds":0.4}}
`

func TestGatewayRoutesTables(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "gw"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gw", "runs.jsonl"), []byte(gatewayRoutesRuns), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "<!-- summary:begin kind=gateway-routes src=gw/runs.jsonl part=propagation -->\n<!-- summary:end -->\n" +
		"<!-- summary:begin kind=gateway-routes src=gw/runs.jsonl part=churn -->\n<!-- summary:end -->\n" +
		"<!-- summary:begin kind=gateway-routes src=gw/runs.jsonl part=memory -->\n<!-- summary:end -->\n"
	path := filepath.Join(dir, "REPORT.md")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, tables, err := render(path, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 3 {
		t.Fatalf("%d tables, want 3", len(tables))
	}
	for _, want := range []string{
		"| gw | 100 | 30 | 5 of 5 | 19.6 / 32.8 / 32.8 / 32.8 | yes | 17.6 / 25.7 | 15.6 / 32.8 | 130.8 | 165.9 / 1014.2 | 20.0 | 70 | true |\n",
		"| gw | 100 | other routes change | 10 | 2399 (200) | 0 | 0 | 0 | 0 | 25 / 50 / 25 (0) | 1.62 / 7.53 / 25.44 | 8 % | yes | true |\n",
		"| gw | 100 | the loaded routes change | 10 | 2399 (200) | 3 | 0 | 0 | 0 | 0 / 100 / 0 (0) | 1.61 / 12.44 / 36.47 | 9 % | no | false: interrupted |\n",
		"| gw | 200 | 60 | 1.8 | 1.9 | 5.8 | 0.3 / 0.8 | 60 → 73 → 76 | 78.0 | 65 → 77 | 0.4 | true |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered tables lack %q:\n%s", want, got)
		}
	}
	for name, b := range map[string]string{
		"no part":      "<!-- summary:begin kind=gateway-routes src=gw/runs.jsonl -->\n<!-- summary:end -->\n",
		"unknown part": "<!-- summary:begin kind=gateway-routes src=gw/runs.jsonl part=nope -->\n<!-- summary:end -->\n",
	} {
		if _, _, err := render(path, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The storm table has a line per endpoint interval, from the runs that carry the storm's figures, and none
// for an older churn run without them.
func TestChurnStormTable(t *testing.T) {
	dir := t.TempDir()
	runs := churnRun + "\n" +
		`{"scenario":"churn","peer":"lbplane","policies":100,"p50Ms":188.9,"p99Ms":231.7,"lbplaneCpuMsPerChange":0.5,"extra":{"achievedRate":206.6,"edsResponses":1114,"edsResponsesPerSecond":18.5,"edsResponsesBusiestSecond":20,"convergedAfterMs":28,"envoyConvergedAfterMs":65,"endpointIntervalMs":50}}` + "\n" +
		`{"scenario":"churn","peer":"lbplane","policies":100,"p50Ms":166.7,"p99Ms":220.2,"lbplaneCpuMsPerChange":0.76,"extra":{"achievedRate":206.6,"edsResponses":5261,"edsResponsesPerSecond":87.4,"edsResponsesBusiestSecond":128,"convergedAfterMs":7,"envoyConvergedAfterMs":26,"endpointIntervalMs":0}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), []byte(runs), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := churnStormTable(spec{kind: "churn-storm", src: []string{filepath.Join(dir, "runs.jsonl")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 50 ms | 100 | 206.6 | 1114 | 18.5 | 20 | 188.9 / 231.7 | 0.50 | 28 | 65 |", "| none | 100 | 206.6 | 5261 | 87.4 | 128 | 166.7 / 220.2 | 0.76 | 7 | 26 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("the storm table lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "\n") != 4 {
		t.Errorf("want a header, its rule and two lines:\n%s", got)
	}
}

// A smoke run of the runner's -fanout-replicas row with -fanout-replica-api sotw (500 clients on one
// replica), cut to what the table reads.
const fanoutSotwRun = `{"scenario":"fanout-replicas","api":"sotw","conns":500,"p50Ms":23.752883,"p99Ms":29.396313,"valid":true,"samplesMs":[28.865,16.867,17.044,29.502],"lbplaneCpuMsPerChange":30,"extra":{"change":1,"r0:max":29.502,"r0:p99":29.396,"r0:rssPerClientKiB":69.376,"replicas":1,"via":0}}
`

func TestFanoutReplicasTableByAPI(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "fleet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet", "runs.jsonl"), []byte(fanoutSotwRun+fanoutReplicasRun), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "REPORT.md")
	for _, c := range []struct {
		marker    string
		want, not string
	}{
		// The state-of-the-world clients' runs are shown when asked for, and only then.
		{"kind=fanout-replicas api=sotw", "| fleet | 500 | 1 | 1 (r0) | 23.8 / 29.4 / 29.5 | r0 29.4 / 29.5 | 30 | r0 69.4 | true |\n", "| fleet | 300 |"},
		{"kind=fanout-replicas", "| fleet | 300 | 3 | 1 (r0) |", "| fleet | 500 |"},
	} {
		body := "<!-- summary:begin " + c.marker + " src=fleet/runs.jsonl -->\n<!-- summary:end -->\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _, err := render(path, body)
		if err != nil {
			t.Fatalf("%s: %v", c.marker, err)
		}
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%s: want %q and not %q:\n%s", c.marker, c.want, c.not, got)
		}
	}
}

// A smoke run of the runner's -fanout-rebalance row (900 state-of-the-world clients over three replicas),
// cut to what the table reads.
const fanoutRebalanceRun = `{"scenario":"fanout-rebalance","peer":"lbplane","rep":0,"conns":900,"api":"sotw","errors":0,"p50Ms":139.624,"p99Ms":16145.74,"p999Ms":16145.74,"valid":true,"samplesMs":[107.831,99.572,16145.74,16145.74],"extra":{"afterRestartMaxMs":1153.2414,"afterRestartP99Ms":1153.2414,"backwardsClient":0,"backwardsTrackerStreams":0,"changes":43,"changesNotEverywhere":0,"maxAgeSeconds":30,"maxOverMeanAt60":1.1,"movedSeconds":17.0687,"replicas":3,"shareAt60":0.3311,"targetShare":0.28,"toShareSeconds":13.9306}}
{"scenario":"fanout-rebalance","peer":"lbplane","rep":0,"conns":300,"api":"delta","p50Ms":100,"p99Ms":200,"valid":false,"note":"no reading 60 s after the restart","samplesMs":[100,200],"extra":{"movedSeconds":-1,"toShareSeconds":-1,"shareAt60":-1,"replicas":3,"maxAgeSeconds":30,"backwardsClient":2,"backwardsTrackerStreams":1}}
`

func TestFanoutRebalanceTable(t *testing.T) {
	got, err := fanoutRebalanceTable(writeRuns(t, fanoutRebalanceRun))
	if err != nil {
		t.Fatal(err)
	}
	tableHas(t, got,
		"| fleet | 900 | sotw | 3 | 30 | 17.1 | 14 (28 %) | 33.1 % | 1.10 | 43 | 140 / 16146 / 16146 | 1153 / 1153 | 0 / 0 | 0 | true |\n",
		// Never at the target share, and versions that went back, are said so.
		"| fleet | 300 | delta | 3 | 30 | never | never (0 %) | - | 0.00 | 0 | 100 / 200 / 200 | 0 / 0 | 2 / 1 | 0 | false |\n")
}

// tableHas fails t for each row that the rendered table got lacks.
func tableHas(t *testing.T, got string, rows ...string) {
	t.Helper()
	for _, want := range rows {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}

// writeRuns writes runs as fleet/runs.jsonl in a fresh directory and returns a spec reading it.
func writeRuns(t *testing.T, runs string) spec {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "runs.jsonl")
	if err := os.WriteFile(path, []byte(runs), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec{src: []string{path}}
}

// A smoke run of the runner's -fanout-churn row (800 delta clients for a minute, four policies, the heap
// judged from 20 s), cut to what the table reads, and one too short to judge the heap that recorded neither
// its policies nor its pushes (as the runs before they were). Its pushes per store write, which that run
// did not record yet, are the four-policy F3 run's (results/2026-11-30-vm-fleet/f3-churn).
const fanoutChurnRuns = `{"scenario":"fanout-churn","peer":"lbplane","rep":0,"conns":800,"api":"delta","errors":0,"p50Ms":40.393,"p99Ms":152.987,"p999Ms":241.906,"valid":true,"samplesMs":[42.56,52.883,37.841,241.906],"lbplaneRssBytes":210612224,"extra":{"backwardsClient":0,"changesNotEverywhere":0,"changesPerSecond":9.9643,"heapDrift":0.0859,"heapFromSeconds":20,"heapMaxWindow":100376576,"heapMinWindow":92438528,"heapWithin10":1,"joinPerSecond":30,"lbplaneCores":0.5363,"leavePerSecond":30,"replicas":1,"rssEnd":210612224,"seconds":60.1144,"policies":4,"pushMsP50":6.2,"pushMsP99":12.4,"pushesPerWrite":1.4352,"clusterResponsesPerMember":0.614}}
{"scenario":"fanout-churn","peer":"lbplane","rep":0,"conns":800,"api":"sotw","errors":0,"p50Ms":40,"p99Ms":150,"valid":false,"note":"too short","samplesMs":[40,150],"extra":{"heapDrift":-1,"heapWithin10":-1,"replicas":1,"seconds":20}}
`

func TestFanoutChurnTable(t *testing.T) {
	got, err := fanoutChurnTable(writeRuns(t, fanoutChurnRuns))
	if err != nil {
		t.Fatal(err)
	}
	tableHas(t, got,
		"| fleet | 800 | delta | 1 | 30 / 30 | 4 | 10.0 | 6 / 12 | 1.0 | 40 / 153 / 242 | 0 | 1.44 | 0.61 | 0 | 0.54 | 88–96, from 0.3 | 8.6 % | yes | 201 | true |\n",
		// Too short to judge the heap: said so, not judged; one policy, and nothing said of its pushes.
		"| fleet | 800 | sotw | 1 | 0 / 0 | 1 | 0.0 | - | 0.3 | 40 / 150 / 150 | 0 | - | - | 0 | 0.00 | - | - | - | 0 | false |\n")
}

// A propagation row names its headroom in its variant and shows lbplane's peak RSS beside the one at its end.
func TestPropagationTableShowsPeakRSS(t *testing.T) {
	dir := t.TempDir()
	run := `{"scenario":"propagation","peer":"lbplane","variant":"push, --gc-headroom-mib 0","api":"delta","policies":100000,"valid":true,"samplesMs":[3,5],"pushSamplesMs":[4,6],"lbplaneRssBytes":1073741824,"lbplaneCpuMsPerChange":7,"extra":{"envoyPolicies":10000,"groups":10,"peakRSS":1288490188.8}}
`
	if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), []byte(run), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "<!-- summary:begin kind=propagation src=runs.jsonl -->\n<!-- summary:end -->\n"
	path := filepath.Join(dir, "REPORT.md")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := render(path, body)
	if err != nil {
		t.Fatal(err)
	}
	tableHas(t, got, "| push, --gc-headroom-mib 0 | 100000 | 10000 | 2 |", "| 7.0 | 1024 (peak 1229) |\n")
}
