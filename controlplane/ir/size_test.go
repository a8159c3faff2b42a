package ir

import (
	"testing"
	"unsafe"
)

// Cluster and Endpoint are each one per backend or endpoint of every policy; their fields are ordered so
// that no padding is left, which puts each in a smaller size class.
func TestClusterAndEndpointFillTheirSizeClass(t *testing.T) {
	if s := unsafe.Sizeof(Cluster{}); s > 352 {
		t.Errorf("Cluster is %d bytes, over the 352-byte size class", s)
	}
	if s := unsafe.Sizeof(Endpoint{}); s > 80 {
		t.Errorf("Endpoint is %d bytes, over the 80-byte size class", s)
	}
}
