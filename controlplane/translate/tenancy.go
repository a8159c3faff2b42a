package translate

import (
	"fmt"

	"github.com/lbplane/lbplane/controlplane/tenancy"
)

// Host names belong to namespaces. On a shared port, a host name (or a wildcard covering it, or every host
// when a policy names none) is served by the policy that claimed it first; a later policy of another
// namespace whose names overlap it is not accepted (HostnameConflict), naming the holder. Within one
// namespace only the same name conflicts, as before: one tenant may serve a catch-all beside its own more
// specific names. The operator's delegations (tenancy.Rules) come first: a name delegated to a namespace is
// refused to every other (NotAllowed), whoever claimed it first, and is carved out of broader names other
// namespaces hold.

// tenancy applies the operator's delegations to the policy's claims: the first claim its namespace may not
// make refuses the policy (the message names the field), and the claims delegated to it are noted.
func (f *fragment) tenancy(r tenancy.Rules) string {
	if r.Empty() {
		return ""
	}
	var delegated []bool
	for i, c := range f.claims {
		v := r.Check(f.key.Namespace, f.port, c[2:])
		if !v.Allowed {
			return claimField(f, i) + ": " + v.Why
		}
		if v.Delegated {
			if delegated == nil {
				delegated = make([]bool, len(f.claims))
			}
			delegated[i] = true
		}
	}
	if delegated != nil {
		extra := *f.fragmentExtra // a copy: noExtra is shared
		extra.delegated = delegated
		f.fragmentExtra = &extra
	}
	return ""
}

// claimField is the field a claim comes from.
func claimField(f *fragment, i int) string {
	if f.claims[i][0] == 's' {
		return "spec.listener.tls"
	}
	if f.claims[i][2:] == "*" {
		return "spec.listener.hostnames"
	}
	return fmt.Sprintf("spec.listener.hostnames[%d]", i)
}

// claimKey is the claimants key of a name of one kind ('h' host, 's' server name): a certificate for every
// server name is "" (see sniNames), every host "*".
func claimKey(kind byte, name string) string {
	if kind == 's' && name == "*" {
		name = ""
	}
	return string(kind) + "\x00" + name
}

// coverKeys are the under keys of a claim: the wildcards that cover it other than itself.
func coverKeys(c string) []string {
	ws := tenancy.Wildcards(c[2:])
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = claimKey(c[0], w)
	}
	return out
}

// addUnder records m's claims under the wildcards that cover them, and removeUnder forgets them.
func (ix *portIndex) addUnder(m *member) {
	for _, c := range m.f.claims {
		for _, k := range coverKeys(c) {
			set := ix.under[k]
			if set == nil {
				set = map[*member]struct{}{}
				ix.under[k] = set
			}
			set[m] = struct{}{}
		}
	}
}

func (ix *portIndex) removeUnder(m *member) {
	for _, c := range m.f.claims {
		for _, k := range coverKeys(c) {
			if set := ix.under[k]; set != nil {
				delete(set, m)
				if len(set) == 0 {
					delete(ix.under, k)
				}
			}
		}
	}
}

// overlapping calls fn for every member of another namespace than f's with a claim that overlaps one of
// f's (equal, covering or covered), f's claim first (several times for a member that overlaps several).
func (ix *portIndex) overlapping(f *fragment, fn func(m *member, claim int)) {
	for i, c := range f.claims {
		visit := func(m *member) {
			if m.f != f && m.f.key.Namespace != f.key.Namespace {
				fn(m, i)
			}
		}
		for _, m := range ix.claimants[claimKey(c[0], c[2:])] {
			visit(m)
		}
		for _, k := range coverKeys(c) {
			for _, m := range ix.claimants[k] {
				visit(m)
			}
		}
		if name := c[2:]; name == "" || name == "*" || name[0] == '*' {
			for m := range ix.under[claimKey(c[0], name)] {
				visit(m)
			}
		}
	}
}

// heldElsewhere finds the oldest accepted policy of another namespace, older than f, that holds a name
// overlapping one of f's claims (the first claim that has one), with the claim and the holder's name. A
// pair is left alone when the narrower name is delegated to its own namespace: the operator carved it out
// of the broader one.
func (ix *portIndex) heldElsewhere(f *fragment) (holder *member, claim int, theirs string) {
	found := -1
	ix.overlapping(f, func(m *member, i int) {
		if found >= 0 && i != found || !m.accepted || older(m.f, f) >= 0 {
			return
		}
		kind, name := f.claims[i][0], f.claims[i][2:]
		for j, d := range m.f.claims {
			if d[0] != kind || !tenancy.Overlap(name, d[2:]) {
				continue
			}
			same := tenancy.Covers(name, d[2:]) && tenancy.Covers(d[2:], name)
			switch {
			case !same && tenancy.Covers(d[2:], name) && f.delegatedClaim(i):
				continue
			case !same && tenancy.Covers(name, d[2:]) && m.f.delegatedClaim(j):
				continue
			}
			if holder == nil || older(m.f, holder.f) < 0 {
				holder, theirs, found = m, d[2:], i
			}
			break
		}
	})
	return holder, found, theirs
}

// heldMessage says which policy holds a name f claims (claim i).
func heldMessage(f *fragment, holder *fragment, i int, theirs string) string {
	kind, mine := f.claims[i][0], f.claims[i][2:]
	what, field := "host name", "spec.listener.hostnames"
	if kind == 's' {
		what, field = "server name", "spec.listener.tls"
	}
	name := fmt.Sprintf("%s %q", what, mine)
	if mine == "" || mine == "*" {
		name = fmt.Sprintf("every %s (%q)", what, "*")
	}
	claimed := "it"
	switch {
	case claimKey(kind, mine) == claimKey(kind, theirs):
	case theirs == "" || theirs == "*":
		claimed = fmt.Sprintf("every %s (%q)", what, "*")
	default:
		claimed = fmt.Sprintf("%q", theirs)
	}
	return fmt.Sprintf("%s: %s on port %d overlaps a name held by namespace %s: policy %s claimed %s first",
		field, name, f.port, holder.key.Namespace, holder.key, claimed)
}
