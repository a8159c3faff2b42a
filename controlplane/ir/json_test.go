package ir

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// Every field of Cluster and Endpoint is written, under its name, type and tag: a field added to one and not
// to its mirror would silently vanish from the JSON (marshalAs would panic on one only in the mirror).
func TestJSONMirrorsHaveEveryField(t *testing.T) {
	for _, pair := range [][2]reflect.Type{
		{reflect.TypeOf(Cluster{}), reflect.TypeOf(clusterJSON{})},
		{reflect.TypeOf(Endpoint{}), reflect.TypeOf(endpointJSON{})},
	} {
		in, out := pair[0], pair[1]
		if in.NumField() != out.NumField() {
			t.Errorf("%s has %d fields, %s %d", in.Name(), in.NumField(), out.Name(), out.NumField())
		}
		for i := range in.NumField() {
			f := in.Field(i)
			g, ok := out.FieldByName(f.Name)
			if !ok || g.Type != f.Type || g.Tag != f.Tag {
				t.Errorf("%s.%s (%s %q) is not written as it is", in.Name(), f.Name, f.Type, f.Tag)
			}
		}
	}
	// The point of the order in memory: each a size class, with no padding to spare.
	if s := unsafe.Sizeof(Cluster{}); s > 352 {
		t.Errorf("Cluster is %d bytes, over the 352-byte size class", s)
	}
	if s := unsafe.Sizeof(Endpoint{}); s > 80 {
		t.Errorf("Endpoint is %d bytes, over the 80-byte size class", s)
	}
}

// The JSON lists the fields in the mirror's order, with values from the right fields.
func TestClusterJSONOrder(t *testing.T) {
	c := &Cluster{Name: "c", ChoiceCount: 3, BufferBytes: 7, HTTP2: true, PerEndpointStats: true, MaxRequestsPerConnection: 9,
		Endpoints: []Endpoint{{Address: "a", Port: 1, Draining: true, HealthCheckPort: 2, Backup: true}}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"c","source":{"namespace":"","name":""},"choiceCount":3,"circuitBreakers":{"MaxConnections":0,"MaxPendingRequests":0,"MaxRequests":0,"MaxRetries":0},"endpoints":[{"address":"a","port":1,"draining":true,"healthCheckPort":2,"backup":true}],"http2":true,"maxRequestsPerConnection":9,"bufferBytes":7,"perEndpointStats":true}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
