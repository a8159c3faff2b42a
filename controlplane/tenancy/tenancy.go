// Package tenancy holds the operator's delegation of listener ports and host names to namespaces, and the
// one description of how host names cover each other.
//
// Policies of several namespaces may share a port (one Envoy listener). Without rules, the first policy to
// name a host name (or a wildcard, or no host name at all: every host) on a shared port holds it, and a later
// policy of another namespace whose names overlap it is not accepted (package translate decides that, per
// port). The operator can say more, as a Gateway's listeners do with allowedRoutes: which namespaces may use
// which ports and host names (Rules, lbplane serve --tenancy-file, the chart's tenancy value). A name
// delegated to a namespace is that namespace's, whoever named it first; with undelegated: Deny, a namespace
// may use nothing but what is delegated to it.
package tenancy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Undelegated says whether a namespace may claim ports and host names that no delegation covers.
type Undelegated string

const (
	// Allow: any namespace may claim them; the first to claim a name holds it (the default).
	Allow Undelegated = "Allow"
	// Deny: a namespace may claim only what is delegated to it.
	Deny Undelegated = "Deny"
)

// Delegation gives one namespace host names on ports.
type Delegation struct {
	// Namespace is the namespace the names belong to.
	Namespace string `json:"namespace"`
	// Ports are the listener ports; empty: every port.
	Ports []int32 `json:"ports,omitempty"`
	// Hostnames are host names, exact or "*.suffix" wildcards, or "*" (every host name, and so the whole
	// port, TCP included); empty means ["*"].
	Hostnames []string `json:"hostnames,omitempty"`
}

// File is what --tenancy-file holds.
type File struct {
	Undelegated Undelegated  `json:"undelegated,omitempty"`
	Delegations []Delegation `json:"delegations,omitempty"`
}

// Rules are the parsed delegations. The zero value delegates nothing and allows every namespace, which
// leaves first-claim ownership alone in force. Rules are never modified once made.
type Rules struct {
	deny        bool
	delegations []Delegation // hostnames filled in
	key         string
}

// MaxDelegations bounds the file: the checks walk every delegation of a namespace.
const MaxDelegations = 10000

// Load reads and checks a tenancy file.
func Load(path string) (Rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Rules{}, fmt.Errorf("--tenancy-file: %w", err)
	}
	r, err := Parse(b)
	if err != nil {
		return Rules{}, fmt.Errorf("--tenancy-file %s: %w", path, err)
	}
	return r, nil
}

// Parse checks a tenancy document (YAML or JSON); unknown fields are errors.
func Parse(b []byte) (Rules, error) {
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return Rules{}, err
	}
	return New(f)
}

// New checks f and returns its rules.
func New(f File) (Rules, error) {
	var errs []error
	switch f.Undelegated {
	case "", Allow, Deny:
	default:
		errs = append(errs, fmt.Errorf("undelegated: %q is not Allow or Deny", f.Undelegated))
	}
	if len(f.Delegations) > MaxDelegations {
		errs = append(errs, fmt.Errorf("delegations: at most %d, got %d", MaxDelegations, len(f.Delegations)))
		f.Delegations = nil
	}
	r := Rules{deny: f.Undelegated == Deny}
	for i, d := range f.Delegations {
		at := fmt.Sprintf("delegations[%d]", i)
		if msgs := validation.IsDNS1123Label(d.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.namespace: %q: %s", at, d.Namespace, strings.Join(msgs, "; ")))
		}
		for j, p := range d.Ports {
			if p < 1 || p > 65535 {
				errs = append(errs, fmt.Errorf("%s.ports[%d]: %d is not a port (1-65535)", at, j, p))
			}
		}
		for j, h := range d.Hostnames {
			if !validPattern(h) {
				errs = append(errs, fmt.Errorf("%s.hostnames[%d]: %q is not a lowercase DNS name, a \"*.\" wildcard or \"*\"", at, j, h))
			}
		}
		d.Ports, d.Hostnames = slices.Clone(d.Ports), slices.Clone(d.Hostnames)
		if len(d.Hostnames) == 0 {
			d.Hostnames = []string{"*"}
		}
		slices.Sort(d.Ports)
		r.delegations = append(r.delegations, d)
	}
	if err := errors.Join(errs...); err != nil {
		return Rules{}, err
	}
	if r.deny || len(r.delegations) > 0 {
		undelegated := Allow
		if r.deny {
			undelegated = Deny
		}
		b, _ := yaml.Marshal(File{Undelegated: undelegated, Delegations: r.delegations})
		sum := sha256.Sum256(b)
		r.key = hex.EncodeToString(sum[:])
	}
	return r, nil
}

func validPattern(h string) bool {
	if h == "*" {
		return true
	}
	if strings.HasPrefix(h, "*.") {
		return len(validation.IsWildcardDNS1123Subdomain(h)) == 0
	}
	return len(validation.IsDNS1123Subdomain(h)) == 0
}

// Key identifies the rules' content; "" for the zero rules.
func (r Rules) Key() string { return r.key }

// Empty tells whether the rules delegate nothing and allow every namespace.
func (r Rules) Empty() bool { return r.key == "" }

// Describe is the rules in a line, for the log.
func (r Rules) Describe() string {
	if r.Empty() {
		return "no delegations: on a shared port, the first policy to name a host name holds it"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d delegations", len(r.delegations))
	if r.deny {
		b.WriteString("; a namespace may use only what is delegated to it")
	}
	return b.String()
}

// Covers tells whether the host name pattern p covers name n, as Envoy matches a request's host to a
// virtual host's domains and a client's server name to a filter chain's: "*" covers everything, "*.s"
// covers every name ending in ".s" (however many labels come before) and every narrower wildcard, and an
// exact name covers itself. Server names of TLS certificates follow the same rule; "" (a certificate that
// answers clients without a server name, or with one no other chain lists) is "*".
func Covers(p, n string) bool {
	p, n = star(p), star(n)
	switch {
	case p == n || p == "*":
		return true
	case n == "*" || !strings.HasPrefix(p, "*."):
		return false
	}
	suffix := p[1:] // ".s"
	if strings.HasPrefix(n, "*.") {
		n = n[1:]
	}
	return len(n) > len(suffix) && strings.HasSuffix(n, suffix)
}

// Overlap tells whether two host name patterns share a name.
func Overlap(a, b string) bool { return Covers(a, b) || Covers(b, a) }

func star(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// Wildcards lists the wildcards that cover n other than n itself, narrowest first, "*" last: for
// "a.b.example.com", "*.b.example.com", "*.example.com", "*.com" and "*".
func Wildcards(n string) []string {
	n = star(n)
	if n == "*" {
		return nil
	}
	rest := strings.TrimPrefix(n, "*.")
	var out []string
	if !strings.HasPrefix(n, "*.") {
		// An exact name: its parent's wildcard first.
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			rest = rest[i+1:]
			out = append(out, "*."+rest)
		} else {
			rest = ""
		}
	}
	for rest != "" {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		out = append(out, "*."+rest)
	}
	return append(out, "*")
}

// Verdict is the rules' answer for one name a policy claims on a port.
type Verdict struct {
	// Allowed is false when the namespace may not claim the name there; Why says so, naming the rule.
	Allowed bool
	Why     string
	// Delegated is true when a delegation of the namespace itself covers the name: the name is then the
	// namespace's, whoever of another namespace claimed an overlapping broader name before.
	Delegated bool
}

// Check says whether namespace ns may claim host or server name n on port. The narrowest delegated pattern
// that covers n decides whose it is (the patterns covering one name nest, so there is one narrowest): port
// 80 may be delegated to one namespace and *.team-a.example.com on it to another.
func (r Rules) Check(ns string, port int32, n string) Verdict {
	if r.Empty() {
		return Verdict{Allowed: true}
	}
	n = star(n)
	listed := false
	var onPort []string // ns's patterns on this port, for the message
	best := -1          // the length of the narrowest pattern covering n, and the namespaces it is delegated to
	var owners []string
	for _, d := range r.delegations {
		listed = listed || d.Namespace == ns
		if len(d.Ports) > 0 && !slices.Contains(d.Ports, port) {
			continue
		}
		for _, h := range d.Hostnames {
			if d.Namespace == ns && !slices.Contains(onPort, h) {
				onPort = append(onPort, h)
			}
			switch {
			case !Covers(h, n) || len(h) < best:
			case len(h) > best:
				best, owners = len(h), []string{d.Namespace}
			case !slices.Contains(owners, d.Namespace):
				owners = append(owners, d.Namespace)
			}
		}
	}
	switch {
	case slices.Contains(owners, ns):
		return Verdict{Allowed: true, Delegated: true}
	case len(owners) > 0:
		return Verdict{Why: fmt.Sprintf("%s on port %d is delegated to namespace %s", describe(n), port, strings.Join(owners, ", "))}
	case !r.deny:
		return Verdict{Allowed: true}
	case !listed:
		return Verdict{Why: fmt.Sprintf("nothing is delegated to namespace %s, and a namespace may use only what is delegated to it (undelegated: Deny)", ns)}
	case len(onPort) == 0:
		return Verdict{Why: fmt.Sprintf("port %d is not delegated to namespace %s (it may use %s; undelegated: Deny)", port, ns, r.portsOf(ns))}
	}
	return Verdict{Why: fmt.Sprintf("namespace %s may use only %s on port %d (undelegated: Deny); %s is not among them", ns, strings.Join(onPort, ", "), port, describe(n))}
}

// portsOf describes the ports delegated to ns.
func (r Rules) portsOf(ns string) string {
	var ports []string
	for _, d := range r.delegations {
		if d.Namespace != ns {
			continue
		}
		if len(d.Ports) == 0 {
			return "every port"
		}
		for _, p := range d.Ports {
			if s := strconv.Itoa(int(p)); !slices.Contains(ports, s) {
				ports = append(ports, s)
			}
		}
	}
	if len(ports) == 1 {
		return "port " + ports[0]
	}
	return "ports " + strings.Join(ports, ", ")
}

// describe names a claimed name in a message: "*" is every host name.
func describe(n string) string {
	if n == "*" {
		return `every host name ("*", no hostnames)`
	}
	return fmt.Sprintf("host name %q", n)
}
