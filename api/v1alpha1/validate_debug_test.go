package v1alpha1_test

import (
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

func TestValidateDebugHeaders(t *testing.T) {
	p := valid()
	p.Spec.DebugHeaders = true
	v1alpha1.Default(p)
	if errs := v1alpha1.Validate(p); len(errs) != 0 {
		t.Errorf("debugHeaders on HTTP: %v", errs)
	}
	p.Spec.Listener.Protocol = v1alpha1.ProtocolTCP
	errs := v1alpha1.Validate(p)
	if len(errs) != 1 || errs[0].Path != "spec.debugHeaders" {
		t.Errorf("debugHeaders on TCP: %v", errs)
	}
}
