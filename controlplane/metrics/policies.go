package metrics

import (
	"bufio"
	"cmp"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The policies' families, written by writePolicies rather than gathered (see Handler).
const (
	policiesHelp  = "Policies by condition type (Accepted, ResolvedRefs, Programmed, RolledBack), status and reason."
	conditionHelp = "Always 1: one series per policy and condition type (Accepted, ResolvedRefs, Programmed, and RolledBack once the policy had a staged rollout), labelled with its status and reason, as kube-state-metrics reports conditions."
	stageHelp     = "The stage a policy's last staged rollout reached (from 1), labelled with its phase: Progressing, Paused, Succeeded, RolledBack or Aborted. Absent for a policy that never had one."
	stagesHelp    = "How many stages a policy's last staged rollout has. Absent for a policy that never had one."
)

// conditionKey is what lbplane_policies counts by.
type conditionKey struct{ typ, status, reason string }

// writePolicies writes lbplane_policy_condition, lbplane_policy_rollout_stage and _stages and
// lbplane_policies in the Prometheus text format (0.0.4), as policies lists them: each policy's series are
// written as it comes and nothing of it is kept, but for the rollout series (policies with a rollout) and
// the counts, written after. A family with no series is left out, as the registry leaves it.
func writePolicies(w io.Writer, policies func(yield func(PolicyConditions) bool)) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	var stage, stages []byte
	counts := map[conditionKey]int{}
	conditions := false
	for p := range policies {
		for _, c := range p.Conditions {
			counts[conditionKey{c.Type, string(c.Status), c.Reason}]++
			if !conditions {
				conditions = true
				bw.WriteString(familyHeader("lbplane_policy_condition", conditionHelp))
			}
			line = sample(line[:0], "lbplane_policy_condition", 1,
				"condition", c.Type, "name", p.Policy.Name, "namespace", p.Policy.Namespace, "reason", c.Reason, "status", string(c.Status))
			bw.Write(line)
		}
		if r := p.Rollout; r != nil {
			stage = sample(stage, "lbplane_policy_rollout_stage", float64(r.Stage), "name", p.Policy.Name, "namespace", p.Policy.Namespace, "phase", r.Phase)
			stages = sample(stages, "lbplane_policy_rollout_stages", float64(r.Stages), "name", p.Policy.Name, "namespace", p.Policy.Namespace)
		}
	}
	if len(stage) > 0 {
		bw.WriteString(familyHeader("lbplane_policy_rollout_stage", stageHelp))
		bw.Write(stage)
		bw.WriteString(familyHeader("lbplane_policy_rollout_stages", stagesHelp))
		bw.Write(stages)
	}
	if len(counts) > 0 {
		bw.WriteString(familyHeader("lbplane_policies", policiesHelp))
		keys := make([]conditionKey, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b conditionKey) int {
			return cmp.Or(strings.Compare(a.typ, b.typ), strings.Compare(a.reason, b.reason), strings.Compare(a.status, b.status))
		})
		for _, k := range keys {
			line = sample(line[:0], "lbplane_policies", float64(counts[k]), "condition", k.typ, "reason", k.reason, "status", k.status)
			bw.Write(line)
		}
	}
	return bw.Flush()
}

// familyHeader is a gauge family's HELP and TYPE lines.
func familyHeader(name, help string) string {
	return "# HELP " + name + " " + helpEscaper.Replace(help) + "\n# TYPE " + name + " gauge\n"
}

var (
	// The text format's escapes: backslash and line feed in HELP; those and the double quote in label values.
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// sample appends one sample line to b: name{label="value",...} v. labels are name, value pairs, in the
// order of their names, as the registry writes them.
func sample(b []byte, name string, v float64, labels ...string) []byte {
	b = append(b, name...)
	b = append(b, '{')
	for i := 0; i < len(labels); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, labels[i]...)
		b = append(b, `="`...)
		b = append(b, valueEscaper.Replace(labels[i+1])...)
		b = append(b, '"')
	}
	b = append(b, "} "...)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	return append(b, '\n')
}

// exposition is the scrape's response: the registries' families go to body (compressed when asked), and the
// status they were answered with is kept, so that the policies' families follow only a complete answer.
type exposition struct {
	http.ResponseWriter
	body   io.Writer
	status int
}

func (e *exposition) WriteHeader(code int) {
	e.status = code
	e.ResponseWriter.WriteHeader(code)
}

func (e *exposition) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.status = http.StatusOK
	}
	return e.body.Write(b)
}

// acceptsGzip tells whether the scraper takes a gzip-compressed answer, as Prometheus does.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); enc == "gzip" {
			return true
		}
	}
	return false
}
