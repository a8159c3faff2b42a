package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpandListen(t *testing.T) {
	got, err := expandListen([]string{"127.0.0.1:18081-18083", "[::1]:9000", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083", "[::1]:9000", "127.0.0.1:0"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for addr, msg := range map[string]string{
		"127.0.0.1:18083-18081": "runs upwards",
		"127.0.0.1:1-1000":      "at most 256 ports",
		"127.0.0.1:0-3":         "two ports from 1 to 65535",
		"127.0.0.1:80-x":        "two ports from 1 to 65535",
		"127.0.0.1:80-70000":    "two ports from 1 to 65535",
		"18081":                 "--listen 18081: ",
	} {
		if _, err := expandListen([]string{addr}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", addr, err, msg)
		}
	}
}

func TestDefaultNames(t *testing.T) {
	// One address keeps the name it always had: the address as given.
	if got := defaultNames([]string{"127.0.0.1:0"}, []string{"127.0.0.1:41000"}); !slices.Equal(got, []string{"127.0.0.1:0"}) {
		t.Errorf("one address: %v", got)
	}
	// Several: backend-<bound port>, or the address where two share a port.
	got := defaultNames([]string{"127.0.0.1:0", "127.0.0.1:18082", "127.0.0.2:9000", "127.0.0.3:9000"},
		[]string{"127.0.0.1:41000", "127.0.0.1:18082", "127.0.0.2:9000", "127.0.0.3:9000"})
	want := []string{"backend-41000", "backend-18082", "127.0.0.2:9000", "127.0.0.3:9000"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0,127.0.0.1:0", "--name", "a"}, "--name: one name per --listen address (2 addresses, 1 names)"},
		{[]string{"--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--name", "a,b,c"}, "(2 addresses, 3 names)"},
		{[]string{"--listen", "127.0.0.1:0,"}, "empty value"},
		{[]string{"--listen", "127.0.0.1:0", "extra"}, `unexpected argument "extra"`},
		{[]string{"--listen", "127.0.0.1:0", "--utilization", "2"}, "--utilization must be between 0 and 1"},
		{[]string{"--listen", "127.0.0.1:0", "--client-ca", "ca.pem"}, "--client-ca needs --tls-cert and --tls-key"},
		{[]string{"--listen", "127.0.0.1:0", "--fail-with", "1000"}, "--fail-with must be an HTTP status (200-599) or 0, got 1000"},
		{[]string{"--listen", "127.0.0.1:0", "--drain", "-1s"}, "--drain must not be negative, got -1s"},
	} {
		err := run(context.Background(), c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// A backend started with --fail-with answers every request with that status, under its name, while its
// health endpoint still answers 200 (a broken backend that health checks do not catch).
func TestFailWith(t *testing.T) {
	r, w := io.Pipe()
	go run(context.Background(), []string{"--listen", "127.0.0.1:0", "--name", "broken", "--fail-with", "500"}, w)
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, r)
	addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	for path, want := range map[string]int{"/": 500, "/any": 500, "/healthz": 200} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || (path != "/healthz" && resp.Header.Get("X-Backend") != "broken") {
			t.Errorf("%s: status %d X-Backend %q, want %d from broken", path, resp.StatusCode, resp.Header.Get("X-Backend"), want)
		}
	}
}

// A stop with --drain: for the drain the backend still answers, but its health endpoint says 503 and every
// response closes its connection; a connection kept alive from before the stop is closed after its next
// response, not under it. Then run returns nil and the address no longer answers.
func TestDrain(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--name", "b", "--drain", "5s"}, w) }()
	lines := bufio.NewReader(r)
	line, err := lines.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	client := &http.Client{Transport: &http.Transport{}}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := get("/"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before the stop: status %d, Connection: close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	stop()
	if line, err := lines.ReadString('\n'); err != nil || line != "draining for 5s\n" {
		t.Fatalf("after the stop: %q %v, want the drain announced", line, err)
	}
	// The connection kept alive from before: answered, then closed by the backend.
	if resp := get("/"); resp.StatusCode != 200 || !resp.Close || resp.Header.Get("X-Backend") != "b" {
		t.Errorf("draining: status %d from %q, Connection: close %v; want 200 from b and the connection closed", resp.StatusCode, resp.Header.Get("X-Backend"), resp.Close)
	}
	if resp := get("/healthz"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("draining: health %d, want 503", resp.StatusCode)
	}
	go io.Copy(io.Discard, lines)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after the drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return 30 s after a stop with a 5 s drain")
	}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Error("the backend still answers after it stopped")
	}
}
