// Package benchstat holds the summary statistics of the benchmark runner, shared by bench/runner (which
// writes them) and bench/summarize (which renders the reports' tables from the raw runs), so that a table
// rendered again gives the figures the run gave.
package benchstat

import "slices"

// Stat3 is a median with the min and max of the samples.
type Stat3 struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Of is the median (the mean of the middle two for an even count) with the min and max.
func Of(xs []float64) Stat3 {
	if len(xs) == 0 {
		return Stat3{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat3{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Percentile is the nearest rank of the sorted samples (p in 0–100).
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s)-1)*p/100 + 0.5)
	return s[min(i, len(s)-1)]
}
