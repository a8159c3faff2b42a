package xdsserver

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"

	"github.com/lbplane/lbplane/controlplane/pki"
)

func parseIssued(t *testing.T, issue func() (*pki.Issued, error)) *x509.Certificate {
	t.Helper()
	is, err := issue()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(is.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAuthorizeNodeAndGroupCertificates(t *testing.T) {
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	node := identityOfCert(parseIssued(t, func() (*pki.Issued, error) { return ca.IssueClient("envoy-1", "edge", 0) }))
	group := identityOfCert(parseIssued(t, func() (*pki.Issued, error) { return ca.IssueGroup("edge", 0) }))
	if node.AnyNode || !group.AnyNode {
		t.Fatalf("node certificate AnyNode=%v, group certificate AnyNode=%v", node.AnyNode, group.AnyNode)
	}
	for _, tc := range []struct {
		name        string
		id          Identity
		node, group string
		ok          bool
	}{
		{"node cert, its node and group", node, "envoy-1", "edge", true},
		{"node cert, another node", node, "envoy-2", "edge", false},
		{"node cert, another group", node, "envoy-1", "internal", false},
		{"group cert, any node of its group", group, "lbplane-envoy-7d9f-abcde", "edge", true},
		{"group cert, another node of its group", group, "envoy-1", "edge", true},
		{"group cert, another group", group, "envoy-1", "internal", false},
		{"group cert, empty group", group, "envoy-1", "", false},
	} {
		if err := tc.id.authorize(tc.node, tc.group); (err == nil) != tc.ok {
			t.Errorf("%s: authorize(%q, %q) = %v, want ok=%v", tc.name, tc.node, tc.group, err, tc.ok)
		}
	}
}

// A certificate whose OU disagrees with its group URI, or that carries more than the group URI, is not a
// group certificate: it falls back to the exact node check of its CN.
func TestGroupURIAloneIsNotEnough(t *testing.T) {
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	c := parseIssued(t, func() (*pki.Issued, error) { return ca.IssueGroup("edge", 0) })
	c.Subject.OrganizationalUnit = []string{"internal"}
	if id := identityOfCert(c); id.AnyNode || id.authorize("any", "internal") == nil {
		t.Errorf("group URI edge with OU internal: %+v", id)
	}
	c = parseIssued(t, func() (*pki.Issued, error) { return ca.IssueGroup("edge", 0) })
	c.URIs = append(c.URIs, pki.ClientURI("n1", "edge"))
	if id := identityOfCert(c); id.AnyNode {
		t.Errorf("group and node URIs together: %+v", id)
	}
}
