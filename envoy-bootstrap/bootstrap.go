// Package envoybootstrap renders the bootstrap an Envoy needs to get its config from lbplane.
package envoybootstrap

import (
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"text/template"
)

//go:embed bootstrap.yaml.tmpl
var source string

var tmpl = template.Must(template.New("bootstrap").Funcs(template.FuncMap{"quote": strconv.Quote}).Parse(source))

// Params of a bootstrap.
type Params struct {
	NodeID string
	// Group is the proxy group (node cluster). Defaults to "default".
	Group string
	// XDS is lbplane's xDS address, host:port.
	XDS string
	// Delta selects incremental xDS (DELTA_GRPC) instead of state of the world (GRPC).
	Delta          bool
	AdminPort      int
	MaxConnections int
	// TLS, when set, makes Envoy connect to lbplane over mTLS with these files (paths on the Envoy's host).
	TLS *TLS
}

// TLS is the Envoy side of xDS over mTLS.
type TLS struct {
	Cert, Key, CA string
	// ServerName is verified against lbplane's certificate; defaults to the xDS host.
	ServerName string
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// Render returns the bootstrap YAML.
func Render(p Params) ([]byte, error) {
	if p.Group == "" {
		p.Group = "default"
	}
	if p.MaxConnections == 0 {
		p.MaxConnections = 100000
	}
	if !nameRe.MatchString(p.NodeID) {
		return nil, fmt.Errorf("--node-id: must be letters, digits, '.', '_', ':' and '-', got %q", p.NodeID)
	}
	if !nameRe.MatchString(p.Group) {
		return nil, fmt.Errorf("--proxy-group: must be letters, digits, '.', '_', ':' and '-', got %q", p.Group)
	}
	host, port, err := net.SplitHostPort(p.XDS)
	if err != nil {
		return nil, fmt.Errorf("--xds-address: %w", err)
	}
	pn, err := strconv.Atoi(port)
	if err != nil || pn < 1 || pn > 65535 {
		return nil, fmt.Errorf("--xds-address: invalid port %q", port)
	}
	if p.AdminPort < 0 || p.AdminPort > 65535 {
		return nil, fmt.Errorf("--admin-port: must be between 0 and 65535, got %d", p.AdminPort)
	}
	api := "GRPC"
	if p.Delta {
		api = "DELTA_GRPC"
	}
	if t := p.TLS; t != nil {
		if t.Cert == "" || t.Key == "" || t.CA == "" {
			return nil, fmt.Errorf("--xds-tls-cert, --xds-tls-key and --xds-tls-ca go together")
		}
		if t.ServerName == "" {
			t.ServerName = host
		}
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, map[string]any{"NodeID": p.NodeID, "Group": p.Group, "XDSHost": host, "XDSPort": pn,
		"APIType": api, "AdminPort": p.AdminPort, "MaxConnections": p.MaxConnections, "TLS": p.TLS})
	return buf.Bytes(), err
}
