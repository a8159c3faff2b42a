package serve

import (
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/xdscache"
)

// With every port configured, the engine has them before the sources load: once the ports are bound
// (as Run then gives them again) nothing is translated a second time. A port given as 0 is left out until
// it is bound.
func TestPortsBeforeSourcesTranslateOnce(t *testing.T) {
	eng := engine.New(xdscache.New(), slog.New(slog.DiscardHandler))
	cfg := &Config{XDSAddress: "127.0.0.1:18000", APIAddress: "127.0.0.1:0"}
	portsBeforeSources(eng, cfg, "127.0.0.1:9090")
	if got := eng.Rules().OwnPorts; len(got) != 2 || got[0].Port != 18000 || got[1].Port != 9090 {
		t.Fatalf("own ports before binding = %v, want 18000 and 9090 (the API's 0 is not known yet)", got)
	}
	var policies []*v1alpha1.LoadBalancerPolicy
	for i := range 20 {
		p := &v1alpha1.LoadBalancerPolicy{}
		p.Name, p.Namespace = fmt.Sprintf("p-%d", i), "default"
		p.Spec.Listener = v1alpha1.Listener{Address: "0.0.0.0", Port: 8080, Protocol: "HTTP", Hostnames: []string{fmt.Sprintf("p-%d.example.com", i)}}
		p.Spec.Backends = []v1alpha1.Backend{{Name: "app", Endpoints: []v1alpha1.Endpoint{{Address: "198.51.100.7", Port: 80}}}}
		policies = append(policies, p)
	}
	eng.Set(engine.SourceStore, policies)
	loaded := eng.Translations()
	if loaded != int64(len(policies)) {
		t.Fatalf("%d policies translated on load, want %d", loaded, len(policies))
	}
	bound := func(addr string) {
		t.Helper()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		cfg.APIAddress = l.Addr().String()
	}
	// The ports bound as configured: the same rules, no translation.
	eng.SetHost(hostView(nil, ownPorts(Ports{XDS: cfg.XDSAddress, API: "127.0.0.1:0", Metrics: "127.0.0.1:9090"})))
	if n := eng.Translations() - loaded; n != 0 {
		t.Fatalf("binding the configured ports translated %d policies again, want none", n)
	}
	// The API's port 0 bound: a port the rules did not have, so every policy is translated again.
	bound("127.0.0.1:0")
	eng.SetHost(hostView(nil, ownPorts(Ports{XDS: cfg.XDSAddress, API: cfg.APIAddress, Metrics: "127.0.0.1:9090"})))
	if n := eng.Translations() - loaded; n != int64(len(policies)) {
		t.Fatalf("a newly bound port translated %d policies again, want %d", n, len(policies))
	}
}
