// Package gatewaybench renders the tables of the Gateway API routes row (bench/runner -only gateway-routes)
// from its runs.jsonl lines. The runner writes them into the row's REPORT.md and bench/summarize renders them
// again from the raw file (kind gateway-routes), so both go through this one function.
package gatewaybench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lbplane/lbplane/bench/internal/benchstat"
)

// Scenario is the runs.jsonl scenario of the row; the variants are its phases.
const (
	Scenario = "gateway-routes"
	// Propagation: one new HTTPRoute at a time among N attached, timed from the create call's answer to the
	// first 200 for it through Envoy.
	Propagation = "propagation"
	// Churn: routes added, updated and deleted beside a constant load on other routes.
	Churn = "churn"
	// UpdateUnderLoad: the routes under load are themselves updated (weights, backends, filters).
	UpdateUnderLoad = "update-under-load"
	// Memory: lbplane's RSS and CPU to converge N routes, in a fresh lbplane.
	Memory = "memory"
)

// TargetP99Ms is the target for Propagation at 3,000 routes: a new route serves within 50 ms at p99.
const TargetP99Ms = 50

// Run is the part of a runs.jsonl line (the runner's runRecord) the tables read.
type Run struct {
	Scenario    string             `json:"scenario"`
	Variant     string             `json:"variant"`
	Policies    int                `json:"policies"` // the HTTPRoutes attached
	Requests    int64              `json:"requests"`
	Errors      int64              `json:"errors"`
	RPS         float64            `json:"rps"`
	P50         float64            `json:"p50Ms"`
	P99         float64            `json:"p99Ms"`
	Valid       bool               `json:"valid"`
	Note        string             `json:"note"`
	Samples     []float64          `json:"samplesMs"`
	PushSamples []float64          `json:"pushSamplesMs"`
	LbplaneRSS  float64            `json:"lbplaneRssBytes"`
	CPUPerRoute float64            `json:"lbplaneCpuMsPerChange"`
	Extra       map[string]float64 `json:"extra"`

	// Dir names the run: the directory of the runs.jsonl it came from.
	Dir string `json:"-"`
}

// Parts are the tables Table renders (a marker's part=).
var Parts = []string{"propagation", "churn", "memory"}

// Table renders one part of the row's results, a line per run of that part, or an error when there is none.
func Table(part string, runs []Run) (string, error) {
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	header := func(cells ...string) {
		row(cells...)
		b.WriteString("|" + strings.Repeat("---|", len(cells)) + "\n")
	}
	n := 0
	switch part {
	case "propagation":
		header("run", "routes", "host names", "new routes timed", "create answered → first 200 p50 / p90 / p99 / max ms", "p99 ≤ 50 ms",
			"a new host name p50 / p99 ms", "a path on a shared host name p50 / p99 ms", "create sent → first 200 p99 ms", "create answered → status Accepted p50 / p99 ms",
			"lbplane CPU ms per new route", "lbplane RSS MiB", "valid")
		for _, r := range runs {
			if r.Scenario != Scenario || r.Variant != Propagation {
				continue
			}
			n++
			x := r.Extra
			p99 := benchstat.Percentile(r.Samples, 99)
			meets := "yes"
			if p99 > TargetP99Ms || len(r.Samples) == 0 {
				meets = "no"
			}
			row(r.Dir, strconv.Itoa(r.Policies), f0(x["hostnames"]), fmt.Sprintf("%d of %s", len(r.Samples), f0(x["samplesWanted"])),
				fmt.Sprintf("%s / %s / %s / %s", f1(benchstat.Percentile(r.Samples, 50)), f1(benchstat.Percentile(r.Samples, 90)), f1(p99), f1(benchstat.Percentile(r.Samples, 100))),
				meets, f1(x["ownHostP50Ms"])+" / "+f1(x["ownHostP99Ms"]), f1(x["sharedHostP50Ms"])+" / "+f1(x["sharedHostP99Ms"]),
				f1(benchstat.Percentile(r.PushSamples, 99)), f1(x["statusP50Ms"])+" / "+f1(x["statusP99Ms"]),
				f1(r.CPUPerRoute), mib(r.LbplaneRSS), validity(r))
		}
	case "churn":
		header("run", "routes", "phase", "s", "requests (per s)", "non-2xx", "connection errors", "answered by another route", "not sent in time",
			"route changes: added / updated / deleted (API errors)", "request p50 / p99 / max ms", "lbplane share of a core", "no request failed", "valid")
		for _, r := range runs {
			if r.Scenario != Scenario || (r.Variant != Churn && r.Variant != UpdateUnderLoad) {
				continue
			}
			n++
			x := r.Extra
			phase := "other routes change"
			if r.Variant == UpdateUnderLoad {
				phase = "the loaded routes change"
			}
			none := "yes"
			if r.Errors > 0 {
				none = "no"
			}
			row(r.Dir, strconv.Itoa(r.Policies), phase, f0(x["seconds"]), fmt.Sprintf("%d (%s)", r.Requests, f0(r.RPS)), f0(x["non2xx"]), f0(x["connectionErrors"]),
				f0(x["wrongRoute"]), f0(x["late"]), fmt.Sprintf("%s / %s / %s (%s)", f0(x["added"]), f0(x["updated"]), f0(x["deleted"]), f0(x["apiErrors"])),
				fmt.Sprintf("%s / %s / %s", f2(r.P50), f2(r.P99), f2(x["maxMs"])), f0(x["lbplaneCoreShare"]*100)+" %", none, validity(r))
		}
	case "memory":
		header("run", "routes", "host names", "created in s", "the last served after s", "settled after s", "lbplane CPU s to the last served / settled",
			"lbplane RSS MiB: Gateway only → served → settled", "KiB per route", "Envoy RSS MiB: Gateway only → settled", "Envoy CPU s to settled", "valid")
		for _, r := range runs {
			if r.Scenario != Scenario || r.Variant != Memory {
				continue
			}
			n++
			x := r.Extra
			row(r.Dir, strconv.Itoa(r.Policies), f0(x["hostnames"]), f1(x["createSeconds"]), f1(x["servedSeconds"]), f1(x["settledSeconds"]),
				f1(x["cpuToServedSeconds"])+" / "+f1(x["cpuToSettledSeconds"]), mib(x["idleRSS"])+" → "+mib(x["servedRSS"])+" → "+mib(r.LbplaneRSS),
				f1(x["rssPerRouteKiB"]), mib(x["envoyIdleRSS"])+" → "+mib(x["envoyRSS"]), f1(x["envoyCPUSeconds"]), validity(r))
		}
	default:
		return "", fmt.Errorf("part=%q: want one of %s", part, strings.Join(Parts, ", "))
	}
	if n == 0 {
		return "", fmt.Errorf("no %s rows of scenario %s", part, Scenario)
	}
	return b.String(), nil
}

func validity(r Run) string {
	if r.Valid {
		return "true"
	}
	if r.Note != "" {
		return "false: " + strings.ReplaceAll(r.Note, "|", "/")
	}
	return "false"
}

func f0(x float64) string  { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string  { return strconv.FormatFloat(x, 'f', 1, 64) }
func f2(x float64) string  { return strconv.FormatFloat(x, 'f', 2, 64) }
func mib(b float64) string { return f0(b / (1 << 20)) }
