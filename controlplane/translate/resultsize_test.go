package translate

import (
	"testing"
	"unsafe"
)

// There is a PolicyResult per policy: its booleans sit together so that it fits the 256-byte size class.
func TestPolicyResultFitsItsSizeClass(t *testing.T) {
	if s := unsafe.Sizeof(PolicyResult{}); s > 256 {
		t.Errorf("PolicyResult is %d bytes, over the 256-byte size class", s)
	}
}
