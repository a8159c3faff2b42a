package xdscache

import (
	"maps"
	"slices"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// referencedSecrets returns the names of the Secrets that the state's listeners and clusters use over SDS.
// A stream is served a Secret only when its name is in this set: a Secret that no listener or cluster of the
// node's group references is answered as unknown, whatever the node asks for, so a private key reaches only
// the Envoys that terminate or originate TLS with it. Nil when the state has no Secret at all (nothing to
// filter, and nothing to walk).
func referencedSecrets(s *State) map[string]bool {
	if s.sets[resource.SecretType].len() == 0 {
		return nil
	}
	refs := map[string]bool{}
	for _, typ := range []string{resource.ListenerType, resource.ClusterType} {
		s.sets[typ].each(func(e *entry) bool {
			for _, n := range e.sds {
				refs[n] = true
			}
			return true
		})
	}
	return refs
}

// sdsNames lists the Secrets a listener or cluster uses, found once when the resource is made.
func sdsNames(typ string, m proto.Message) []string {
	if m == nil || (typ != resource.ListenerType && typ != resource.ClusterType) {
		return nil
	}
	refs := map[string]bool{}
	collectSDSNames(m.ProtoReflect(), refs)
	if len(refs) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(refs))
}

var sdsConfigName = (&tlsv3.SdsSecretConfig{}).ProtoReflect().Descriptor().FullName()

// collectSDSNames walks m, including the messages packed in Any fields (transport sockets are typed
// configs), and adds the name of every SdsSecretConfig it finds.
func collectSDSNames(m protoreflect.Message, out map[string]bool) {
	switch m.Descriptor().FullName() {
	case sdsConfigName:
		if n := m.Get(m.Descriptor().Fields().ByName("name")).String(); n != "" {
			out[n] = true
		}
		return
	case "google.protobuf.Any":
		a, ok := m.Interface().(*anypb.Any)
		if !ok {
			return
		}
		inner, err := a.UnmarshalNew()
		if err != nil { // a type this binary does not know cannot reference a secret it serves
			return
		}
		collectSDSNames(inner.ProtoReflect(), out)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				collectSDSNames(l.Get(i).Message(), out)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					collectSDSNames(mv.Message(), out)
					return true
				})
			}
		default:
			collectSDSNames(v.Message(), out)
		}
		return true
	})
}

// servable drops the Secrets a group does not reference from what a stream is about to be given.
func servable(typ string, refs map[string]bool, entries []*entry, versions map[string]string) ([]*entry, map[string]string) {
	if typ != resource.SecretType {
		return entries, versions
	}
	kept := entries[:0:0]
	for _, e := range entries {
		if refs[e.name] {
			kept = append(kept, e)
		} else {
			delete(versions, e.name)
		}
	}
	return kept, versions
}
