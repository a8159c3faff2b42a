package envoybootstrap

import (
	"encoding/json"
	"strings"
	"testing"
)

// The bootstrap's fields (grpc-go reads it in e2e's TestProxylessGRPC), and errors naming the flag.
func TestGRPCBootstrap(t *testing.T) {
	for _, p := range []GRPCParams{
		{NodeID: "n1", Group: "edge", Zone: "zone-a", XDS: []string{"127.0.0.1:18000"}, CredsDir: "/var/lib/n1"},
		{NodeID: "n1", Group: "default", XDS: []string{"127.0.0.1:18000", "127.0.0.2:18000"}, Insecure: true},
	} {
		b, err := GRPCBootstrap(p)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Node struct {
				ID, Cluster string
				Metadata    map[string]string
			}
			XDSServers []struct {
				ServerURI    string                  `json:"server_uri"`
				ChannelCreds []struct{ Type string } `json:"channel_creds"`
			} `json:"xds_servers"`
			Providers map[string]struct {
				PluginName string `json:"plugin_name"`
			} `json:"certificate_providers"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		wantCreds := "tls"
		if p.Insecure {
			wantCreds = "insecure"
		}
		if got.Node.ID != p.NodeID || got.Node.Cluster != p.Group || got.Node.Metadata["lbplane.io/client"] != "grpc" ||
			len(got.XDSServers) != len(p.XDS) || got.XDSServers[0].ChannelCreds[0].Type != wantCreds {
			t.Errorf("bootstrap %+v for %+v", got, p)
		}
		if !p.Insecure && (got.Providers["lbplane"].PluginName != "file_watcher" || !strings.Contains(string(b), "/var/lib/n1/tls.key")) {
			t.Errorf("no file_watcher provider on the credentials files: %s", b)
		}
	}
	for _, p := range []GRPCParams{
		{XDS: []string{"127.0.0.1:18000"}, Insecure: true},
		{NodeID: "n", XDS: []string{"127.0.0.1"}, Insecure: true},
		{NodeID: "n", XDS: []string{"127.0.0.1:18000"}},
	} {
		if _, err := GRPCBootstrap(p); err == nil || !strings.HasPrefix(err.Error(), "--") {
			t.Errorf("%+v: %v, want an error naming the flag", p, err)
		}
	}
}
