package main

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
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
	} {
		err := run(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// A backend started with --fail-with answers every request with that status, under its name, while its
// health endpoint still answers 200 (a broken backend that health checks do not catch).
func TestFailWith(t *testing.T) {
	r, w := io.Pipe()
	go run([]string{"--listen", "127.0.0.1:0", "--name", "broken", "--fail-with", "500"}, w)
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
