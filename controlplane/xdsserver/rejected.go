package xdsserver

import (
	"bytes"
	"slices"
	"strings"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// sentResources is what one response of a type carried, kept so that a NACK of it can be put on the
// resources it may be about. Both are references to the response's own slices (whose resources the cache
// shares between every response that carries them), never copies.
type sentResources struct {
	// delta holds a delta response's resources: only the changed ones, so each is a candidate.
	delta []*discovery.Resource
	// sotw holds a state-of-the-world response's resources: every resource of the type.
	sotw []*anypb.Any
	// removed are the names a delta response removed.
	removed []string
}

// replaces tells whether a delta response sent a new version of the named resource, or removed it.
func (s sentResources) replaces(name string) bool {
	return slices.Contains(s.removed, name) || slices.ContainsFunc(s.delta, func(r *discovery.Resource) bool { return r.GetName() == name })
}

// MaxNackedResources bounds the resources a NACK is put on. Beyond it (a rejected first response, which
// carries everything, with a message naming none of it) the NACK is left unattributed: listing thousands
// of names would not tell anyone more than "this type", and every status and report would carry them.
const MaxNackedResources = 256

// rejected returns the resources a NACK of sent may be about, sorted: the candidates are what sent
// carried that the proxy had not acknowledged already (a delta response's resources; for state of the
// world, the resources that differ from the last acknowledged response of the type, acked), and when
// more than one is a candidate, the ones Envoy's message names, if it names any. Nil means unknown. sure
// is true when the result is exactly what Envoy rejected: one candidate, or the ones its message names.
func rejected(sent, acked sentResources, msg string) (names []string, sure bool) {
	var candidates []string
	if sent.delta != nil {
		for _, r := range sent.delta {
			candidates = append(candidates, r.GetName())
		}
	} else {
		candidates = changedSince(sent.sotw, acked.sotw)
	}
	sure = len(candidates) == 1
	if len(candidates) > 1 {
		var named []string
		for _, n := range candidates {
			if Mentions(msg, n) {
				named = append(named, n)
			}
		}
		if len(named) > 0 {
			candidates, sure = named, true
		}
	}
	if len(candidates) == 0 || len(candidates) > MaxNackedResources {
		return nil, false
	}
	slices.Sort(candidates)
	return slices.Compact(candidates), sure
}

// changedSince names the resources of sent that acked does not hold as they are. The cache hands every
// response the same *anypb.Any for an unchanged resource, so most are told apart by pointer; the others
// (a state rebuilt from scratch) by name and bytes.
func changedSince(sent, acked []*anypb.Any) []string {
	same := make(map[*anypb.Any]bool, len(acked))
	for _, a := range acked {
		same[a] = true
	}
	var byName map[string][]byte
	var out []string
	for _, a := range sent {
		if same[a] {
			continue
		}
		name := resourceName(a)
		if byName == nil {
			byName = make(map[string][]byte, len(acked))
			for _, b := range acked {
				byName[resourceName(b)] = b.GetValue()
			}
		}
		if old, ok := byName[name]; ok && bytes.Equal(old, a.GetValue()) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// resourceName reads a resource's name without decoding the rest of it: every type served (Cluster,
// ClusterLoadAssignment, Listener, RouteConfiguration, Secret) keeps it in field 1, which a deterministic
// marshal writes first.
func resourceName(a *anypb.Any) string {
	b := a.GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return ""
			}
			return string(v)
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return ""
		}
		b = b[m:]
	}
	return ""
}

// Mentions reports whether msg names a resource (or a virtual host, a route) as a whole word: "http-80" is
// not named by a message about "http-8080".
func Mentions(msg, name string) bool {
	for i := 0; name != "" && i < len(msg); {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameChar(msg[start-1])) && (end == len(msg) || !nameChar(msg[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/' || c == '.'
}
