package envoybootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
)

// GRPCParams describe the xDS bootstrap of a proxyless gRPC client (grpc-go, grpc-java, grpc-c++: the file
// GRPC_XDS_BOOTSTRAP names): the node, lbplane's xDS addresses, and, unless Insecure, the directory
// WriteCredentials wrote the client's certificate, key and lbplane's CA into.
type GRPCParams struct {
	NodeID, Group, Zone string
	XDS                 []string
	CredsDir            string
	Insecure            bool
}

// grpcRefresh is how often gRPC's file_watcher reads the credential files again: a renewed certificate is
// taken within it, without a restart.
const grpcRefresh = "600s"

// GRPCBootstrap returns the gRPC xDS bootstrap JSON. The xDS connection is mTLS with the files in CredsDir
// (channel credentials "tls", which gRPC watches), the node says it is a gRPC client (node metadata
// lbplane.io/client: grpc, besides its user agent), and the same files are offered to the application as
// certificate provider instance "lbplane" (plugin file_watcher).
func GRPCBootstrap(p GRPCParams) ([]byte, error) {
	if p.NodeID == "" {
		return nil, errors.New("--node-id: required")
	}
	if len(p.XDS) == 0 {
		return nil, errors.New("--xds-address: required")
	}
	for _, a := range p.XDS {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("--xds-address: want host:port, got %q", a)
		}
	}
	if !p.Insecure && p.CredsDir == "" {
		return nil, errors.New("--out-dir: the certificate files are needed (or --xds-insecure)")
	}
	creds := []any{map[string]any{"type": "insecure"}}
	var providers map[string]any
	if !p.Insecure {
		files := map[string]any{
			"certificate_file":    filepath.Join(p.CredsDir, CertFile),
			"private_key_file":    filepath.Join(p.CredsDir, KeyFile),
			"ca_certificate_file": filepath.Join(p.CredsDir, CAFile),
			"refresh_interval":    grpcRefresh,
		}
		creds = []any{map[string]any{"type": "tls", "config": files}}
		providers = map[string]any{"lbplane": map[string]any{"plugin_name": "file_watcher", "config": files}}
	}
	var servers []any
	for _, a := range p.XDS {
		// server_features ignore_resource_deletion is left out: lbplane's state-of-the-world answers are
		// whole, so a listener or cluster left out of one is gone.
		servers = append(servers, map[string]any{"server_uri": a, "channel_creds": creds, "server_features": []string{"xds_v3"}})
	}
	node := map[string]any{"id": p.NodeID, "cluster": p.Group, "metadata": map[string]any{"lbplane.io/client": "grpc"}}
	if p.Zone != "" {
		node["locality"] = map[string]any{"zone": p.Zone}
	}
	out := map[string]any{"xds_servers": servers, "node": node}
	if providers != nil {
		out["certificate_providers"] = providers
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
