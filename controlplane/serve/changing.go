package serve

import (
	"net/http"
	"sync/atomic"
)

// changeRequests counts the push API's requests that may change config while they are answered: from the
// moment a push arrives until it is translated and sent to the Envoys (and, with --push-wait, until they
// acknowledge it), a stats read started would hold an Envoy's main thread just as the change reaches it.
// The xDS server's tracker sees a change only once it is sent; this covers the time before.
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

// any tells whether a request that may change config is being answered.
func (c *changeRequests) any() bool { return c.n.Load() > 0 }
