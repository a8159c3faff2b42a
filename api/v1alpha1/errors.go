package v1alpha1

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a policy.
type FieldError struct {
	// Path is the field path, as in "spec.backends[1].loadBalancing.algorithm".
	Path string
	// Msg says what is wrong and, where it helps, what is allowed.
	Msg string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// FieldErrors is every problem found in one policy.
type FieldErrors []FieldError

func (es FieldErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// path builds field paths without string concatenation scattered around validation.
type path string

func (p path) child(name string) path { return path(string(p) + "." + name) }
func (p path) index(i int) path       { return path(fmt.Sprintf("%s[%d]", p, i)) }
