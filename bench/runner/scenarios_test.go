package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestSlopeIsBytesPerConnection(t *testing.T) {
	steps := []wsStep{{Conns: 1000, RSS: 10_000_000 + 1000*4096, Heap: 5_000_000 + 1000*1024},
		{Conns: 2000, RSS: 10_000_000 + 2000*4096, Heap: 5_000_000 + 2000*1024},
		{Conns: 3000, RSS: 10_000_000 + 3000*4096, Heap: 5_000_000 + 3000*1024}}
	rss := func(s wsStep) int64 { return s.RSS }
	if got := slope(steps, rss); math.Abs(got-4096) > 1e-6 {
		t.Fatalf("slope = %v, want 4096", got)
	}
	if got := slope(steps, func(s wsStep) int64 { return s.Heap }); math.Abs(got-1024) > 1e-6 {
		t.Fatalf("heap slope = %v, want 1024", got)
	}
	if got := slope(steps[:1], rss); got != 0 {
		t.Fatalf("slope of one step = %v, want 0", got)
	}
}

func TestSummarizeHealth(t *testing.T) {
	res := healthResult{KillAt: 1, ReturnAt: 3, End: 4}
	outs := []outcome{
		{sent: 0.1, took: 0.001, backend: "backend-2"},
		{sent: 0.2, took: 0.002, backend: "backend-0"},
		{sent: 1.1, took: 0.5, failed: true},
		{sent: 1.6, took: 0.002, failed: true},
		{sent: 2.0, took: 0.004, backend: "backend-1"},
		{sent: 3.2, took: 0.001, backend: "backend-0"},
		{sent: 3.7, took: 0.001, backend: "backend-2"},
		{sent: 3.9, took: 0.001, backend: "backend-2"},
	}
	summarizeHealth(&res, outs, "backend-2")
	if res.Requests != 8 || res.Failed != 2 {
		t.Fatalf("requests %d failed %d, want 8 and 2", res.Requests, res.Failed)
	}
	if math.Abs(res.LastFailure-0.6) > 1e-9 {
		t.Fatalf("last failure %v s after the kill, want 0.6", res.LastFailure)
	}
	if math.Abs(res.Back-0.7) > 1e-9 {
		t.Fatalf("back %v s after the return, want 0.7", res.Back)
	}
	if res.MaxDown != 500 {
		t.Fatalf("max while dead %v ms, want 500", res.MaxDown)
	}
	if res.P99Before != 2 || res.P99After != 1 || res.P99Calm != 2 {
		t.Fatalf("p99 before %v ms, after %v ms, both %v ms: want 2, 1 and 2", res.P99Before, res.P99After, res.P99Calm)
	}
	if len(res.Bins) != 16 {
		t.Fatalf("%d bins, want 16 (4 s of 0.25 s)", len(res.Bins))
	}
	var killed, failed int
	for _, b := range res.Bins {
		killed += b.Killed
		failed += b.Failed
	}
	if killed != 3 || failed != 2 {
		t.Fatalf("bins count %d to the killed backend and %d failed, want 3 and 2", killed, failed)
	}
}

func TestSummarizeHealthWithoutFailuresOrReturn(t *testing.T) {
	res := healthResult{KillAt: 1, ReturnAt: 2, End: 3}
	summarizeHealth(&res, []outcome{{sent: 1.5, backend: "backend-0"}, {sent: 2.5, backend: "backend-0"}}, "backend-2")
	if res.LastFailure != -1 || res.Back != -1 {
		t.Fatalf("last failure %v, back %v: want -1 for none and never", res.LastFailure, res.Back)
	}
}

func TestUsualBackendIsTheMostFrequent(t *testing.T) {
	if b, n := usual(map[string]int{"backend-0": 3, "backend-1": 97}); b != "backend-1" || n != 97 {
		t.Fatalf("usual = %s %d", b, n)
	}
	// Ties go to the first name, so that a rerun gives the same answer.
	if b, _ := usual(map[string]int{"backend-1": 5, "backend-0": 5}); b != "backend-0" {
		t.Fatalf("tie went to %s", b)
	}
}

func TestOpensslConfLimitsTheClientToOneSuite(t *testing.T) {
	dir := t.TempDir()
	for _, s := range tlsSuites {
		path, err := opensslConf(dir, s)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		conf := string(b)
		for _, want := range []string{"MinProtocol = " + s.Protocol, "MaxProtocol = " + s.Protocol} {
			if !strings.Contains(conf, want) {
				t.Errorf("%s: no %q in\n%s", s.Key, want, conf)
			}
		}
		key := "CipherString = "
		if s.Protocol == "TLSv1.3" {
			key = "Ciphersuites = "
		}
		if !strings.Contains(conf, key+s.Cipher+"\n") {
			t.Errorf("%s: no %q in\n%s", s.Key, key+s.Cipher, conf)
		}
	}
}

func TestClientAddressesAreDistinctLoopbackAddresses(t *testing.T) {
	seen := map[string]bool{}
	for i := range 6000 {
		ip := clientIP(i)
		if !ip.IsLoopback() {
			t.Fatalf("client %d: %s is not a loopback address", i, ip)
		}
		if seen[ip.String()] {
			t.Fatalf("client %d: %s used twice", i, ip)
		}
		seen[ip.String()] = true
	}
}
