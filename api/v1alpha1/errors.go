package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
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

// ErrorList gives the problems in apimachinery's form, for callers that report them the Kubernetes way
// (an admission response, an aggregate error).
func (es FieldErrors) ErrorList() field.ErrorList {
	out := make(field.ErrorList, len(es))
	for i, e := range es {
		out[i] = &field.Error{Type: field.ErrorTypeInvalid, Field: e.Path, BadValue: field.OmitValueType{}, Detail: e.Msg}
	}
	return out
}

// fromErrorList keeps each problem's path and detail: the messages already say what value was wrong, so
// apimachinery's "Invalid value: ..." prefix would only repeat it.
func fromErrorList(list field.ErrorList) FieldErrors {
	if len(list) == 0 {
		return nil
	}
	out := make(FieldErrors, len(list))
	for i, e := range list {
		out[i] = FieldError{Path: e.Field, Msg: e.Detail}
	}
	return out
}

// path is a field path ("spec.routes[0].match"), built by apimachinery's field.Path.
type path struct{ p *field.Path }

func newPath(name string) path { return path{field.NewPath(name)} }

func (p path) child(name string) path { return path{p.p.Child(name)} }
func (p path) index(i int) path       { return path{p.p.Index(i)} }
func (p path) String() string         { return p.p.String() }
