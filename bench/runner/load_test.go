package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// openLoop sends at its rate until the end, records each request's outcome with its send time, and stops
// at the first error of before.
func TestOpenLoop(t *testing.T) {
	var n atomic.Int64
	send := func() (string, error) {
		if n.Add(1)%2 == 0 {
			return "", errors.New("status 500")
		}
		return "backend-0", nil
	}
	outs, err := openLoop(context.Background(), time.Now(), 0.5, 100, nil, send)
	if err != nil {
		t.Fatal(err)
	}
	// 50 due in 0.5 s; a busy machine's ticker may drop some ticks, never add any.
	if len(outs) < 10 || len(outs) > 51 {
		t.Fatalf("%d requests in 0.5 s at 100/s", len(outs))
	}
	failed := 0
	for _, o := range outs {
		if o.sent < 0 || o.sent >= 0.5 {
			t.Errorf("a request sent at %.3f s", o.sent)
		}
		if o.failed {
			failed++
		} else if o.backend != "backend-0" {
			t.Errorf("an answered request from %q", o.backend)
		}
	}
	if failed != len(outs)/2 {
		t.Errorf("%d of %d failed, want every second one", failed, len(outs))
	}
	stop := errors.New("stop")
	outs, err = openLoop(context.Background(), time.Now(), 5, 100, func(now float64) error {
		if now >= 0.1 {
			return stop
		}
		return nil
	}, send)
	if !errors.Is(err, stop) || len(outs) > 11 {
		t.Fatalf("before's error: got %v after %d requests", err, len(outs))
	}
}
