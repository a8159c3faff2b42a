// Package addrlimit limits requests with token buckets, as the push API and the dashboard's token checks both
// do: a request that proves a credential (a good bearer token) draws on that credential's bucket, any other
// on its client address's. Guessing a token is then throttled per address, wherever a token is taken, and
// a flood of wrong tokens from an address the host's own clients share (a policy can route a public
// listener to the push API from the Envoy's loopback address) does not starve the holder of a good token.
package addrlimit

import (
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

// maxAddresses bounds the memory an address scan can take: past it, every bucket starts afresh.
const maxAddresses = 10000

// Limiter holds one bucket per client address and one per credential. The zero value is ready to use.
type Limiter struct {
	mu          sync.Mutex
	buckets     map[string]*rate.Limiter
	credentials map[string]*rate.Limiter
}

// Allow takes one token from r's address bucket, which refills at perSecond with a burst of twice as many;
// perSecond <= 0 means no limit.
func (l *Limiter) Allow(r *http.Request, perSecond float64) bool {
	return l.AllowFor(r, "", perSecond)
}

// AllowFor takes one token from the bucket of credential, the name of what r proved (a token's role), or,
// when it proved nothing (""), from r's address bucket; each refills at perSecond with a burst of twice as
// many. perSecond <= 0 means no limit.
func (l *Limiter) AllowFor(r *http.Request, credential string, perSecond float64) bool {
	if perSecond <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if credential != "" {
		if l.credentials == nil {
			l.credentials = map[string]*rate.Limiter{}
		}
		return bucket(l.credentials, credential, perSecond).Allow()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if _, ok := l.buckets[host]; !ok && (l.buckets == nil || len(l.buckets) > maxAddresses) {
		l.buckets = map[string]*rate.Limiter{}
	}
	return bucket(l.buckets, host, perSecond).Allow()
}

func bucket(m map[string]*rate.Limiter, key string, perSecond float64) *rate.Limiter {
	b, ok := m[key]
	if !ok {
		b = rate.NewLimiter(rate.Limit(perSecond), int(2*perSecond)+1)
		m[key] = b
	}
	return b
}
