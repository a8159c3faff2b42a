package lbctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushclient"
)

// tokenFileError is a --token-file that cannot be read.
type tokenFileError struct{ err error }

func (e *tokenFileError) Error() string { return "--token-file: " + e.err.Error() }
func (e *tokenFileError) Unwrap() error { return e.err }

// errEmptyTokenFile is a token file with nothing in it: being written, or not a token file.
var errEmptyTokenFile = errors.New("the file is empty")

// waitInterval is how often waitForServer tries again.
const waitInterval = 200 * time.Millisecond

// waitForServer returns a client once the push API answers an authenticated call, trying again for up to
// timeout while lbplane is evidently still starting: its token file does not exist yet or is empty (lbplane
// writes it on first start, before it listens) or its address refuses connections. Anything else fails at
// once: a refused token, a TLS error, an address that does not answer at all; waiting would only hide it.
func (g *globals) waitForServer(ctx context.Context, timeout time.Duration) (*pushclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for said := false; ; {
		c, err := g.connect()
		if err == nil {
			_, err = c.Version(ctx)
			if err == nil {
				return c, nil
			}
		}
		if !starting(err) {
			return nil, err
		}
		if !said && g.stderr != nil {
			fmt.Fprintf(g.stderr, "waiting up to %s for lbplane at %s: %v\n", timeout, g.server, err)
			said = true
		}
		t := time.NewTimer(waitInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, ctx.Err() // Ctrl-C
			}
			return nil, fmt.Errorf("--wait-server: lbplane at %s not up within %s: %w", g.server, timeout, err)
		case <-t.C:
		}
	}
}

// starting tells whether err is what a push API that is still starting answers.
func starting(err error) bool {
	var tfe *tokenFileError
	if errors.As(err, &tfe) {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errEmptyTokenFile)
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
