// Package addrlimit limits the requests of each client address with a token bucket, as the push API and the
// dashboard's token checks both do, so that guessing a token is throttled wherever a token is taken.
package addrlimit

import (
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

// maxAddresses bounds the memory an address scan can take: past it, every bucket starts afresh.
const maxAddresses = 10000

// Limiter holds one bucket per client address. The zero value is ready to use.
type Limiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// Allow takes one token from r's address bucket, which refills at perSecond with a burst of twice as many;
// perSecond <= 0 means no limit.
func (l *Limiter) Allow(r *http.Request, perSecond float64) bool {
	if perSecond <= 0 {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[host]
	if !ok {
		if l.buckets == nil || len(l.buckets) > maxAddresses {
			l.buckets = map[string]*rate.Limiter{}
		}
		b = rate.NewLimiter(rate.Limit(perSecond), int(2*perSecond)+1)
		l.buckets[host] = b
	}
	return b.Allow()
}
