package main

import (
	"github.com/lbplane/lbplane/bench/internal/benchstat"

	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The raw files' shapes, as bench/runner writes them (runs.jsonl: one run a line; summary.json: the
// medians and the hash, health and WebSocket results). Only the fields a table reads.

type run struct {
	Scenario     string    `json:"scenario"`
	Peer         string    `json:"peer"`
	Rep          int       `json:"rep"`
	Conns        int       `json:"conns"`
	Variant      string    `json:"variant"`
	Policies     int       `json:"policies"`
	API          string    `json:"api"`
	Errors       int64     `json:"errors"`
	P50          float64   `json:"p50Ms"`
	P99          float64   `json:"p99Ms"`
	Valid        bool      `json:"valid"`
	Samples      []float64 `json:"samplesMs"`
	PushSamples  []float64 `json:"pushSamplesMs"`
	LbplaneRSS   float64   `json:"lbplaneRssBytes"`
	CPUPerChange float64   `json:"lbplaneCpuMsPerChange"`
	// CPUPerRequest is the peer's CPU µs per request (paired rounds).
	CPUPerRequest float64            `json:"cpuMicrosPerRequest"`
	Extra         map[string]float64 `json:"extra"`

	dir string // the directory of the runs.jsonl it came from, relative to the report
}

// stat3, stats and percentile are the runner's own (bench/internal/benchstat), so a table rendered again
// gives the figures the run gave.
type stat3 = benchstat.Stat3

func stats(xs []float64) stat3 { return benchstat.Of(xs) }

func percentile(xs []float64, p float64) float64 { return benchstat.Percentile(xs, p) }

type summaryRow struct {
	Scenario string `json:"scenario"`
	Peer     string `json:"peer"`
	Conns    int    `json:"conns"`
	Protocol string `json:"protocol"`
	Runs     int    `json:"runs"`
	Invalid  int    `json:"invalid"`
	RPS      stat3  `json:"rps"`
	P99      stat3  `json:"p99Ms"`
	CPU      stat3  `json:"cpuMicrosPerRequest"`
	RSS      stat3  `json:"peakRssBytes"`
	IdleRSS  stat3  `json:"idleRssBytes"`
	Errors   int64  `json:"errors"`
}

type health struct {
	Peer       string             `json:"peer"`
	Variant    string             `json:"variant"`
	Requests   int64              `json:"requests"`
	Failed     int64              `json:"failed"`
	P99Before  float64            `json:"p99BeforeMs"`
	P99Down    float64            `json:"p99DownMs"`
	P99After   float64            `json:"p99AfterMs"`
	EnvoyStats map[string]float64 `json:"envoyStats"`
}

type hotKey struct {
	Peer            string  `json:"peer"`
	Factor          int     `json:"factor"`
	Workload        string  `json:"workload"`
	Errors          int64   `json:"errors"`
	MaxOverMean     float64 `json:"maxOverMean"`
	HotKeyHome      float64 `json:"hotKeyOnHome"`
	KeysMovedOffHot float64 `json:"keysMovedOffHotHome"`
	RequestsMoved   float64 `json:"requestsOffHome"`
}

type webSocket struct {
	Peer         string  `json:"peer"`
	Kind         string  `json:"kind"`
	Target       int     `json:"target"`
	Opened       int     `json:"opened"`
	Alive        int     `json:"alive"`
	Errors       int64   `json:"errors"`
	BytesPerConn float64 `json:"bytesPerConnection"`
	HeapPerConn  float64 `json:"heapBytesPerConnection"`
}

type wsmemRow struct {
	Label        string  `json:"label"`
	Conns        int     `json:"conns"`
	Alive        int     `json:"alive"`
	AllocatedKiB float64 `json:"allocatedKiB"`
	HeapKiB      float64 `json:"heapKiB"`
	RSSKiB       float64 `json:"rssKiB"`
}

type summaryFile struct {
	Summary   []summaryRow `json:"summary"`
	Health    []health     `json:"health"`
	HotKey    []hotKey     `json:"hotKey"`
	WebSocket []webSocket  `json:"webSocket"`

	dir string
}

// readRuns reads runs.jsonl files; each run remembers the directory it came from.
func readRuns(sp spec) ([]run, error) {
	var out []run
	for _, path := range sp.src {
		runs, err := readJSONLines[run](path)
		if err != nil {
			return nil, err
		}
		for i := range runs {
			runs[i].dir = runName(path)
		}
		out = append(out, runs...)
	}
	return out, nil
}

// readJSONLines decodes a file of one JSON object a line, skipping empty lines.
func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var x T
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func readSummaries(sp spec) ([]summaryFile, error) {
	var out []summaryFile
	for _, path := range sp.src {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var s summaryFile
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s.dir = runName(path)
		out = append(out, s)
	}
	return out, nil
}

// runName names a raw file's run by its directory: "push10k" for final/push10k/runs.jsonl.
func runName(path string) string {
	return filepath.Base(filepath.Dir(path))
}
