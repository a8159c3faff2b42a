package lbctl

import (
	"errors"
	"strconv"

	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// mapErrors rewrites the lines of an API error.
func mapErrors(err error, f func(string) string) error {
	var apiErr *pushclient.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	out := &pushclient.APIError{Status: apiErr.Status}
	for _, e := range apiErr.Errors {
		out.Errors = append(out.Errors, f(e))
	}
	return out
}

// exitCode ends a command with a status other than 1 (lint findings, diff differences), printing err when
// there is one.
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}

func (e *exitCode) Unwrap() error { return e.err }
