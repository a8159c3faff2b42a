// Package promseries reads Prometheus text exposition into samples and writes them as the input series of a
// `promtool test rules` file, for tests that hold alert rules to series scraped from the real processes.
package promseries

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one scraped series: its name, labels, value and whether it is a counter.
type Sample struct {
	Name    string
	Labels  map[string]string
	Value   float64
	Counter bool
}

// Key is the series' identity in promtool's notation: name and sorted labels.
func (s Sample) Key() string {
	ls := make([]string, 0, len(s.Labels))
	for k, v := range s.Labels {
		ls = append(ls, k+"="+strconv.Quote(v))
	}
	slices.Sort(ls)
	return s.Name + "{" + strings.Join(ls, ",") + "}"
}

// Parse reads the counters, gauges and untyped series of a Prometheus text exposition.
func Parse(r io.Reader) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			s := Sample{Name: name, Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.Value, s.Counter = m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				s.Value = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				s.Value = m.GetUntyped().GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out, nil
}

var (
	notMetrics = regexp.MustCompile(`(by|on|without|group_left|group_right) ?\([^)]*\)|\{[^}]*\}|[a-z_]+:[a-z0-9_:]+`)
	metricName = regexp.MustCompile(`\b(lbplane|envoy)_[a-z0-9_]+\b`)
)

// Families are the lbplane and Envoy metric families a PromQL expression reads (not recording rules, which
// have a colon, nor up).
func Families(expr string) []string {
	// Label names are not metrics: "by (...)", "on (...)", "group_left (...)" and {...} selectors go first.
	return metricName.FindAllString(notMetrics.ReplaceAllString(expr, ""), -1)
}

// Series writes scrapes (each one scrape of every target, in order, one step of the test's interval apart)
// as promtool input series of the families in names, with the target labels added where a series has none
// of its own (as a ServiceMonitor with honorLabels does). A series that was in a scrape and is missing from
// the next gets a staleness marker there, as Prometheus writes one ("stale"), and no sample ("_") after it
// until it is back; the last scrape is repeated hold more times, as if the process kept answering the same.
func Series(scrapes [][]Sample, target map[string]string, names map[string]bool, hold int) []map[string]string {
	var keys []string
	values := map[string][]string{}
	for i, scrape := range scrapes {
		for _, s := range scrape {
			if !names[s.Name] {
				continue
			}
			labels := map[string]string{}
			for k, v := range target {
				labels[k] = v
			}
			for k, v := range s.Labels {
				labels[k] = v
			}
			k := Sample{Name: s.Name, Labels: labels}.Key()
			if _, ok := values[k]; !ok {
				keys = append(keys, k)
				values[k] = slices.Repeat([]string{"_"}, len(scrapes))
			}
			values[k][i] = strconv.FormatFloat(s.Value, 'g', -1, 64)
		}
	}
	slices.Sort(keys)
	out := make([]map[string]string, 0, len(keys))
	for _, k := range keys {
		v := values[k]
		for i := 1; i < len(v); i++ {
			if v[i] == "_" && v[i-1] != "_" && v[i-1] != "stale" {
				v[i] = "stale"
			}
		}
		text := strings.Join(v, " ")
		if last := v[len(v)-1]; hold > 0 {
			if last == "stale" {
				last = "_"
			}
			text += fmt.Sprintf(" %sx%d", last, hold)
		}
		out = append(out, map[string]string{"series": k, "values": text})
	}
	return out
}
