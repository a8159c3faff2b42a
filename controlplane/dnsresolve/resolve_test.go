package dnsresolve_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/dnsresolve"
	"github.com/lbplane/lbplane/internal/dnstest"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// resolver is a Resolver asking srv, with a hosts file and a resolv.conf of the test's own.
func resolver(t *testing.T, srv *dnstest.Server, hosts string) *dnsresolve.Resolver {
	t.Helper()
	dir := t.TempDir()
	hp, rp := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hp, []byte(hosts), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rp, []byte("search corp.test\noptions ndots:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &dnsresolve.Resolver{Servers: []string{srv.Addr}, HostsFile: hp, ResolvConf: rp, Hostname: "box.example.test",
		HostAddrs: func() []netip.Addr { return addrs("198.51.100.1") }, Timeout: 2 * time.Second}
}

// TestResolveAsTheHostDoes: a name resolves through the conventional local names, the hosts file, the
// machine's own name, then DNS with the search list, each lookup family as Envoy's, with the TTL of the
// answer.
func TestResolveAsTheHostDoes(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set("app.example.test", 30, "198.51.100.7", "198.51.100.8", "2001:db8::7")
	srv.Set("v6only.example.test", 60, "2001:db8::9")
	srv.Set("short.corp.test", 10, "198.51.100.11")
	r := resolver(t, srv, "127.0.0.1 localhost\n127.0.1.1 vm vm.local # the host\n198.51.100.5 db.example.test\nfe80::1%eth0 zoned\n")
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		family v1alpha1.DNSLookupFamily
		want   []netip.Addr
		ttl    time.Duration
	}{
		{"localhost", v1alpha1.DNSV4Preferred, addrs("127.0.0.1"), 0},
		{"admin.localhost", v1alpha1.DNSV6, addrs("::1"), 0},
		{"VM.", v1alpha1.DNSV4Preferred, addrs("127.0.1.1"), 0},
		{"db.example.test", v1alpha1.DNSAll, addrs("198.51.100.5"), 0},
		{"box", v1alpha1.DNSV4Preferred, addrs("198.51.100.1"), 0},
		{"box.example.test", v1alpha1.DNSV4Preferred, addrs("198.51.100.1"), 0},
		{"app.example.test", v1alpha1.DNSV4Preferred, addrs("198.51.100.7", "198.51.100.8"), 30 * time.Second},
		{"app.example.test", v1alpha1.DNSAuto, addrs("2001:db8::7"), 30 * time.Second},
		{"app.example.test", v1alpha1.DNSAll, addrs("198.51.100.7", "198.51.100.8", "2001:db8::7"), 30 * time.Second},
		{"v6only.example.test", v1alpha1.DNSV4Preferred, addrs("2001:db8::9"), time.Minute},
		{"short", v1alpha1.DNSV4, addrs("198.51.100.11"), 10 * time.Second},
	} {
		a, err := r.Resolve(ctx, c.name, c.family)
		if err != nil || !slices.Equal(a.Addrs, c.want) || a.TTL != c.ttl {
			t.Errorf("%s (%s): %v ttl %s, %v; want %v ttl %s", c.name, c.family, a.Addrs, a.TTL, err, c.want, c.ttl)
		}
	}
	for _, c := range []struct {
		name   string
		family v1alpha1.DNSLookupFamily
		want   string
	}{
		{"nx.example.test", v1alpha1.DNSV4Preferred, "no such host"},
		{"v6only.example.test", v1alpha1.DNSV4, "no address records"},
		{"zoned", v1alpha1.DNSAll, "no such host"},
	} {
		if a, err := r.Resolve(ctx, c.name, c.family); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%s): %v, %v; want an error %q", c.name, c.family, a.Addrs, err, c.want)
		}
	}
	// A server that fails is not a name that does not exist.
	srv.Fail(true)
	if _, err := r.Resolve(ctx, "app.example.test", v1alpha1.DNSV4); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Errorf("with the server failing: %v", err)
	}
	// The hosts file is read again when it changes.
	if err := os.WriteFile(r.HostsFile, []byte("198.51.100.6 db.example.test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	os.Chtimes(r.HostsFile, future, future)
	if a, err := r.Resolve(ctx, "db.example.test", v1alpha1.DNSV4); err != nil || !slices.Equal(a.Addrs, addrs("198.51.100.6")) {
		t.Errorf("after the hosts file changed: %v %v", a.Addrs, err)
	}
}
