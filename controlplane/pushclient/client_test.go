package pushclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// rateLimited answers 429 with retryAfter to the first refuse calls, then 200 with an empty list, and
// records when each call came.
func rateLimited(t *testing.T, refuse int, retryAfter func() string) (*Client, *atomic.Int32, *[]time.Time) {
	t.Helper()
	var calls atomic.Int32
	var at []time.Time
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		at = append(at, time.Now())
		if int(calls.Add(1)) <= refuse {
			w.Header().Set("Retry-After", retryAfter())
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"errors":["too many requests; slow down"]}`))
			return
		}
		w.Write([]byte(`{"items":[]}`))
	}))
	t.Cleanup(hs.Close)
	// One connection at a time, so the handler's appends are ordered.
	return &Client{BaseURL: hs.URL, Token: "t", HTTP: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}}, &calls, &at
}

func TestRetriesTooManyRequestsAfterRetryAfterSeconds(t *testing.T) {
	c, calls, at := rateLimited(t, 2, func() string { return "1" })
	if _, err := c.List(context.Background()); err != nil {
		t.Fatalf("after two 429s: %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", calls.Load())
	}
	// The wait is a lower bound the client must honour: it never comes back sooner than Retry-After.
	for i := 1; i < len(*at); i++ {
		if gap := (*at)[i].Sub((*at)[i-1]); gap < time.Second {
			t.Errorf("retry %d came %v after the 429 that said Retry-After: 1", i, gap)
		}
	}
}

func TestRetriesTooManyRequestsAfterRetryAfterDate(t *testing.T) {
	// An HTTP date has one-second resolution: two seconds ahead is at least one second of wait.
	c, calls, at := rateLimited(t, 1, func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) })
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want 2", calls.Load())
	}
	if gap := (*at)[1].Sub((*at)[0]); gap < time.Second {
		t.Errorf("retried %v after a Retry-After two seconds ahead", gap)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	c, calls, _ := rateLimited(t, 1000, func() string { return "0" })
	_, err := c.List(context.Background())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
		t.Fatalf("error %v, want the last 429", err)
	}
	if got := calls.Load(); got != maxRetries+1 {
		t.Errorf("%d calls, want %d", got, maxRetries+1)
	}
}

func TestNoRetryFailsAtOnce(t *testing.T) {
	c, calls, _ := rateLimited(t, 1000, func() string { return "1" })
	c.NoRetry = true
	if _, err := c.List(context.Background()); err == nil || calls.Load() != 1 {
		t.Errorf("err %v after %d calls", err, calls.Load())
	}
}

func TestRetryAfterIsBounded(t *testing.T) {
	now := time.Now()
	for h, want := range map[string]time.Duration{
		"2":       2 * time.Second,
		"3600":    maxRetryAfter,
		"-5":      100 * time.Millisecond,
		"garbage": time.Second,
		"":        time.Second,
		now.Add(3 * time.Second).UTC().Format(http.TimeFormat): 0, // checked below: between 2 and 3 s
	} {
		got := retryAfter(h, now)
		if want == 0 {
			if got < 2*time.Second || got > 3*time.Second {
				t.Errorf("Retry-After %q: %v", h, got)
			}
			continue
		}
		if got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
}

func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	c, calls, _ := rateLimited(t, 1000, func() string { return "5" })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := c.List(ctx); err == nil {
		t.Fatal("no error")
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls after the context ended", calls.Load())
	}
}
