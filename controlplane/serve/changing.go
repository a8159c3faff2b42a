package serve

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// changeRequests counts the changes being made before they reach the xDS server: the push API's requests
// that may change config while they are answered (from the moment a push arrives until it is translated
// and sent to the Envoys, and, with --push-wait, until they acknowledge it), and, with the etcd store, what
// another replica wrote while it is applied here. A stats read started then would hold an Envoy's main
// thread just as the change reaches it. The xDS server's tracker sees a change only once it is sent; this
// covers the time before.
type changeRequests struct{ n atomic.Int64 }

// count wraps the push API's handler: every request other than GET and HEAD counts while it is answered.
func (c *changeRequests) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			c.n.Add(1)
			defer c.n.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
}

// during counts f as a change being made while it runs: a replica applying what another wrote to the
// shared store.
func (c *changeRequests) during(f func()) {
	c.n.Add(1)
	defer c.n.Add(-1)
	f()
}

// any tells whether a request that may change config is being answered.
func (c *changeRequests) any() bool { return c.n.Load() > 0 }

// maxStepAside bounds how long work that steps aside waits in any second: it still gets done, at most a
// quarter later, under a stream of changes.
const maxStepAside = 250 * time.Millisecond

// stepAside returns a Yield for work that can wait (summing up the Envoys' stats, the health history): while
// changing says a change is being made, it waits, a millisecond at a time, for at most maxStepAside in any
// second. On a small machine a summary of 10,000 clusters (tens of milliseconds) otherwise delays the
// change that arrives during it by as much. Each user gets its own.
func stepAside(changing func() bool) func() {
	var mu sync.Mutex
	var second time.Time
	var waited time.Duration
	return func() {
		for changing() {
			mu.Lock()
			now := time.Now()
			if now.Sub(second) >= time.Second {
				second, waited = now, 0
			}
			spent := waited >= maxStepAside
			mu.Unlock()
			if spent {
				return
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			waited += time.Since(now)
			mu.Unlock()
		}
	}
}
