package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

var cpTrace = flag.String("cp-trace", "", "directory: run the push rows' lbplane with debug logs and write there, per timed change, when it was published, each xDS response sent and its ACK, beside the runner's push, answer and first 200 (pushtrace.go)")

// changeTimes is one timed change as the runner saw it, with the probe requests it made until the 200.
type changeTimes struct {
	Sent, Accepted, Served time.Time
	Probes                 int
}

// tracedStage is one step of a change, in milliseconds from the push sent.
type tracedChange struct {
	Change       int     `json:"change"`
	AcceptedMs   float64 `json:"acceptedMs"`             // the push API answered
	PublishedMs  float64 `json:"publishedMs,omitempty"`  // lbplane's "translated and published" line
	TranslateMs  float64 `json:"translateMs,omitempty"`  // its duration (translate, build, publish)
	PublishingMs float64 `json:"publishingMs,omitempty"` // of which building and publishing
	// CommitStartMs is when building and publishing began: after translation and, for a push, the store's
	// commit (fsync).
	CommitStartMs float64   `json:"commitStartMs,omitempty"`
	FirstSentMs   float64   `json:"firstSentMs,omitempty"` // the first xDS response to the Envoy
	LastSentMs    float64   `json:"lastSentMs,omitempty"`
	LastAckMs     float64   `json:"lastAckMs,omitempty"` // the Envoy's last ACK of them
	ServedMs      float64   `json:"servedMs"`            // the first 200 from the new backend
	Probes        int       `json:"probes"`              // requests the runner made until it
	Exchanges     []string  `json:"exchanges"`           // "+ms type sent|ack|nack nonce"
	GCEnds        []float64 `json:"gcEndsMs,omitempty"`  // lbplane's garbage collections that ended meanwhile
	SinceLastAck  float64   `json:"ackTo200Ms,omitempty"`
	AcceptToFirst float64   `json:"acceptedToFirstSentMs,omitempty"`
}

// lbplaneLine is what pushtrace reads of lbplane's JSON debug log.
type lbplaneLine struct {
	Msg string `json:"msg"`
	At  int64  `json:"at"` // Unix µs
	// Time is the log's own clock (milliseconds), for builds before "at".
	Time  time.Time `json:"time"`
	Type  string    `json:"type"`
	Nonce string    `json:"nonce"`
	Pub   int64     `json:"publishing"` // ns: building and publishing alone (the rest of duration is translation)
	Nack  bool      `json:"nack"`
	Dur   int64     `json:"duration"` // ns
}

// writePushTrace lines the changes up with lbplane's log (logPath) and writes, under *cpTrace, one JSON
// line per change and a summary of where the time went (medians and the slowest changes).
//
// gcEnds are the ends of lbplane's garbage collections (MemStats.PauseEnd, Unix ns; none without pprof).
func writePushTrace(logPath string, name string, changes []changeTimes, gcEnds []int64) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var lines []lbplaneLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l lbplaneLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			if l.At == 0 {
				l.At = l.Time.UnixMicro()
			}
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	ms := func(t time.Time, at int64) float64 { return float64(at-t.UnixMicro()) / 1000 }
	var out []tracedChange
	for i, c := range changes {
		tc := tracedChange{Change: i, AcceptedMs: float64(c.Accepted.Sub(c.Sent).Microseconds()) / 1000,
			ServedMs: float64(c.Served.Sub(c.Sent).Microseconds()) / 1000, Probes: c.Probes}
		sent := map[string]bool{}
		for _, g := range gcEnds {
			if g >= c.Sent.UnixNano() && g <= c.Served.UnixNano() {
				tc.GCEnds = append(tc.GCEnds, float64(g-c.Sent.UnixNano())/1e6)
			}
		}
		for _, l := range lines {
			if l.At < c.Sent.UnixMicro() || l.At > c.Served.UnixMicro() {
				continue
			}
			at := ms(c.Sent, l.At)
			switch l.Msg {
			case "translated and published":
				tc.PublishedMs, tc.TranslateMs, tc.PublishingMs = at, float64(l.Dur)/1e6, float64(l.Pub)/1e6
				if l.Pub > 0 {
					tc.CommitStartMs = at - tc.PublishingMs
				}
			case "delta response":
				if tc.FirstSentMs == 0 {
					tc.FirstSentMs = at
				}
				tc.LastSentMs = at
				sent[l.Nonce] = true
				tc.Exchanges = append(tc.Exchanges, fmt.Sprintf("+%.2f %s sent %s", at, shortTypeURL(l.Type), l.Nonce))
			case "delta request":
				if !sent[l.Nonce] {
					continue
				}
				verdict := "ack"
				if l.Nack {
					verdict = "nack"
				}
				tc.LastAckMs = at
				tc.Exchanges = append(tc.Exchanges, fmt.Sprintf("+%.2f %s %s %s", at, shortTypeURL(l.Type), verdict, l.Nonce))
			}
		}
		if tc.LastAckMs > 0 {
			tc.SinceLastAck = tc.ServedMs - tc.LastAckMs
		}
		if tc.FirstSentMs > 0 {
			tc.AcceptToFirst = tc.FirstSentMs - tc.AcceptedMs
		}
		out = append(out, tc)
	}
	if err := os.MkdirAll(*cpTrace, 0o755); err != nil {
		return err
	}
	var jl strings.Builder
	for _, tc := range out {
		b, _ := json.Marshal(tc)
		jl.Write(b)
		jl.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(*cpTrace, name+".jsonl"), []byte(jl.String()), 0o644); err != nil {
		return err
	}
	col := func(get func(tracedChange) float64) string {
		var xs []float64
		for _, tc := range out {
			xs = append(xs, get(tc))
		}
		return fmt.Sprintf("%7.2f %7.2f %7.2f", percentile(xs, 50), percentile(xs, 90), percentile(xs, 100))
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s: %d changes; ms from the push sent (p50 p90 max)\n", name, len(out))
	fmt.Fprintf(&s, "  push API answered      %s\n", col(func(t tracedChange) float64 { return t.AcceptedMs }))
	fmt.Fprintf(&s, "  build+publish began    %s\n", col(func(t tracedChange) float64 { return t.CommitStartMs }))
	fmt.Fprintf(&s, "  build+publish took     %s\n", col(func(t tracedChange) float64 { return t.PublishingMs }))
	fmt.Fprintf(&s, "  published (lbplane)    %s\n", col(func(t tracedChange) float64 { return t.PublishedMs }))
	fmt.Fprintf(&s, "  translate+publish took %s\n", col(func(t tracedChange) float64 { return t.TranslateMs }))
	fmt.Fprintf(&s, "  first response sent    %s\n", col(func(t tracedChange) float64 { return t.FirstSentMs }))
	fmt.Fprintf(&s, "  last response sent     %s\n", col(func(t tracedChange) float64 { return t.LastSentMs }))
	fmt.Fprintf(&s, "  last ACK               %s\n", col(func(t tracedChange) float64 { return t.LastAckMs }))
	fmt.Fprintf(&s, "  first 200              %s\n", col(func(t tracedChange) float64 { return t.ServedMs }))
	fmt.Fprintf(&s, "  last ACK -> first 200  %s\n", col(func(t tracedChange) float64 { return t.SinceLastAck }))
	fmt.Fprintf(&s, "  probes until the 200   %s\n", col(func(t tracedChange) float64 { return float64(t.Probes) }))
	withGC := 0
	for _, tc := range out {
		withGC += min(len(tc.GCEnds), 1)
	}
	fmt.Fprintf(&s, "  changes during which a GC of lbplane ended: %d (of %d GCs known)\n", withGC, len(gcEnds))
	slow := slices.Clone(out)
	slices.SortFunc(slow, func(a, b tracedChange) int { return int(b.ServedMs*1000) - int(a.ServedMs*1000) })
	for _, tc := range slow[:min(3, len(slow))] {
		fmt.Fprintf(&s, "  slow change %d: answered +%.2f, build+publish began +%.2f, published +%.2f (translate+publish took %.2f), %s, first 200 +%.2f after %d probes; GCs ended at %v\n",
			tc.Change, tc.AcceptedMs, tc.CommitStartMs, tc.PublishedMs, tc.TranslateMs, strings.Join(tc.Exchanges, ", "), tc.ServedMs, tc.Probes, tc.GCEnds)
	}
	fmt.Fprint(os.Stderr, s.String())
	return os.WriteFile(filepath.Join(*cpTrace, name+".txt"), []byte(s.String()), 0o644)
}

func shortTypeURL(u string) string { return u[strings.LastIndex(u, ".")+1:] }

// gcEnds reads the ends of a Go process's last garbage collections (up to 256) from its pprof endpoint.
func gcEnds(ctx context.Context, addr string) []int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?debug=1", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	var out []int64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "# PauseEnd = ["); ok {
			for _, f := range strings.Fields(strings.TrimSuffix(v, "]")) {
				if n, err := strconv.ParseInt(f, 10, 64); err == nil && n > 0 {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
