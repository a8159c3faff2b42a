package main

import (
	"strings"
	"testing"
)

func rolloutFixture() *rolloutRun {
	return &rolloutRun{RatePerEnvoy: 100, BakeSeconds: 10, WindowSeconds: 30, Envoys: 3, FirstStageEnvoys: 1, Cases: []rolloutCase{
		{Name: "immediate", Change: "bad", Mode: "immediate", PushAt: 3, FixAt: 33, RolledBack: -1, SucceededAt: -1, Requests: 9000, Failed: 6750, LastFailure: 30,
			BadEnvoys: roEnvoys, PerEnvoy: []rolloutEnvoy{{Node: "envoy-a", Requests: 3000, Failed: 2250}, {Node: "envoy-b", Requests: 3000, Failed: 2250}, {Node: "envoy-c", Requests: 3000, Failed: 2250}}},
		{Name: "staged", Change: "bad", Mode: "staged", PushAt: 3, FixAt: 33, RolledBack: 14.5, SucceededAt: -1, Requests: 9000, Failed: 860, LastFailure: 11.4,
			BadEnvoys: []string{"envoy-a"}, PerEnvoy: []rolloutEnvoy{{Node: "envoy-a", Requests: 3000, Failed: 860}, {Node: "envoy-b", Requests: 3000}, {Node: "envoy-c", Requests: 3000}},
			Events: []rolloutEvent{{T: 3, Phase: "Progressing", Stage: 1, Stages: 2, Canaries: []string{"envoy-a"}}, {T: 14.5, Phase: "RolledBack", Stage: 1, Stages: 2, Message: "a | b"}}},
		{Name: "staged-good", Change: "good", Mode: "staged", PushAt: 3, FixAt: -1, RolledBack: -1, SucceededAt: 25, Requests: 7000, LastFailure: -1, BadEnvoys: roEnvoys},
	}}
}

// Each claim of issue 33 is checked against the numbers: a run that meets them all says so, and each way of
// missing one is caught.
func TestRolloutChecks(t *testing.T) {
	held := func(ro *rolloutRun) []bool {
		var out []bool
		for _, c := range ro.checks() {
			out = append(out, c.held)
		}
		return out
	}
	if got := held(rolloutFixture()); len(got) != 4 || !(got[0] && got[1] && got[2] && got[3]) {
		t.Fatalf("every claim met: %v", got)
	}
	if v, ok := rolloutFixture().verdict(); !ok || !strings.Contains(v, "75.0 % of all requests failed without stages, 9.6 % staged, rolled back 11.5 s after the push; 4 of 4 claims hold") {
		t.Errorf("verdict %q %v", v, ok)
	}
	for name, spoil := range map[string]func(ro *rolloutRun) int{
		"reached two Envoys":   func(ro *rolloutRun) int { ro.Cases[1].BadEnvoys = []string{"envoy-a", "envoy-b"}; return 0 },
		"never rolled back":    func(ro *rolloutRun) int { ro.Cases[1].RolledBack = -1; return 1 },
		"rolled back too late": func(ro *rolloutRun) int { ro.Cases[1].RolledBack = 3 + 20.5; return 1 },
		"failed too many":      func(ro *rolloutRun) int { ro.Cases[1].Failed = 2251; return 2 },
		"good change held":     func(ro *rolloutRun) int { ro.Cases[2].SucceededAt = -1; return 3 },
	} {
		ro := rolloutFixture()
		i := spoil(ro)
		got := held(ro)
		for j, h := range got {
			if h == (j == i) {
				t.Errorf("%s: claims held %v, want only claim %d missed", name, got, i)
				break
			}
		}
		if _, ok := ro.verdict(); ok {
			t.Errorf("%s: the verdict says every claim holds", name)
		}
	}
}

// With the rollout row alone, REPORT.md is its own report: the question, the machine, the command, the
// result; in a whole report it is a section.
func TestRolloutReport(t *testing.T) {
	r := &report{Rollout: rolloutFixture(), Machine: map[string]string{"cpus": "2", "memory": "25165824 kB", "envoy": "envoy  version: abc/1.40.0/Clean/RELEASE/BoringSSL"},
		Command: "go run ./bench/runner -only rollout"}
	md := r.markdown()
	for _, want := range []string{"# A bad change through three Envoys", "**Question.**", "**Machine.**", "24 GiB", "Envoy 1.40.0", "```sh\ngo run ./bench/runner -only rollout\n```",
		"## Result: 75.0 % of all requests failed", "| bad change, staged | 1 of 3 (envoy-a) | 9000 | 860 | 9.6 % | RolledBack 11.5 s after the push | 11.4 s |",
		"| staged | 860 of 3000 | 0 of 3000 | 0 of 3000 |", "| 11.5 | RolledBack | 1 of 2 |  | a \\| b |", "![rollout](rollout.png)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "**Question.**") > strings.Index(md, "**Machine.**") || strings.Index(md, "**Command**") > strings.Index(md, "## Result") {
		t.Errorf("not in the order question, machine, command, result:\n%s", md)
	}
	r.Runs = []runRecord{{Scenario: "throughput"}}
	if md := r.markdown(); !strings.HasPrefix(md, "# lbplane benchmark report") || !strings.Contains(md, "## A bad change with and without a staged rollout") {
		t.Errorf("the whole report lacks the rollout section")
	}
}
