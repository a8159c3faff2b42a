package ir

import (
	"cmp"
	"slices"
)

// CompareVirtualHosts is the order of a listener's virtual hosts: the catch-all last, then by name. Envoy
// picks exact domains before wildcards on its own, but a stable order keeps the built config (and its
// version) independent of policy order, and lets a build find what changed between two listeners by one
// walk over both.
func CompareVirtualHosts(a, b *VirtualHost) int {
	aw, bw := slices.Contains(a.Domains, "*"), slices.Contains(b.Domains, "*")
	switch {
	case aw && !bw:
		return 1
	case !aw && bw:
		return -1
	}
	return cmp.Compare(a.Name, b.Name)
}
