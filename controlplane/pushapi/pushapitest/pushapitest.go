// Package pushapitest runs the push API in a test's process, with a store of its own, for tests of the API
// and of its clients (lbctl).
package pushapitest

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/lbplane/lbplane/controlplane/engine"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/reach"
	"github.com/lbplane/lbplane/controlplane/store"
	"github.com/lbplane/lbplane/controlplane/xdscache"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

// Start serves a push API whose admin token is token; configure, when set, fills in more of the server
// (a read-only token, health sources) before it loads. It returns the server, its URL and its xDS cache.
func Start(t *testing.T, token string, configure func(*pushapi.Server)) (*pushapi.Server, string, *xdscache.Cache) {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return StartOn(t, st, token, configure)
}

// StartOn is Start on the given store (one shared with other servers, say).
func StartOn(t *testing.T, st store.Store, token string, configure func(*pushapi.Server)) (*pushapi.Server, string, *xdscache.Cache) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := xdscache.New()
	eng := engine.New(cache, log)
	// The tests' policies name backends on loopback, as lbplane serve --allow-backend-cidrs 127.0.0.0/8,::1/128
	// allows.
	eng.Reach = reach.Loopback
	s := &pushapi.Server{Store: st, Engine: eng, Tracker: xdsserver.NewTracker(cache, log), Token: token, Log: log}
	if configure != nil {
		configure(s)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if err := s.LoadOverrides(); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs.URL, cache
}
