package translate

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/ir"
)

// An override names an endpoint by its address (IPv4 or IPv6, any form), or by the host name a static
// endpoint resolved from, with or without a port, in one backend or all.
func TestOverrideMatches(t *testing.T) {
	resolved := ir.Endpoint{Address: "198.51.100.7", Port: 8080, Hostname: "app.example.com"}
	v6 := ir.Endpoint{Address: "2001:db8::1", Port: 443}
	for _, c := range []struct {
		endpoint, backend string
		e                 ir.Endpoint
		want              bool
	}{
		{"198.51.100.7:8080", "", resolved, true},
		{"198.51.100.7", "", resolved, true},
		{"198.51.100.7:8081", "", resolved, false},
		{"app.example.com:8080", "", resolved, true},
		{"APP.example.com", "", resolved, true},
		{"other.example.com", "", resolved, false},
		{"198.51.100.7", "web", resolved, true},
		{"198.51.100.7", "api", resolved, false},
		{"[2001:db8::1]:443", "", v6, true},
		{"2001:db8:0::1", "", v6, true},
		{"[2001:db8::1]:80", "", v6, false},
	} {
		o := v1alpha1.EndpointOverride{Endpoint: c.endpoint, Backend: c.backend, State: v1alpha1.OverrideDraining}
		if got := overrideMatches(&o, "web", c.e); got != c.want {
			t.Errorf("%q (backend %q) on %+v: %v, want %v", c.endpoint, c.backend, c.e, got, c.want)
		}
	}
}
