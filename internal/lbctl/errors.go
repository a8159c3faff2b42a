package lbctl

import (
	"errors"

	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// mapErrors rewrites the lines of an API error.
func mapErrors(err error, f func(string) string) error {
	var apiErr *pushapi.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	out := &pushapi.APIError{Status: apiErr.Status}
	for _, e := range apiErr.Errors {
		out.Errors = append(out.Errors, f(e))
	}
	return out
}
