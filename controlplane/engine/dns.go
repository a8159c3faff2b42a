package engine

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/translate"
)

// Resolution of backends' host names. lbplane resolves them itself, so that it can check every address
// against the server's rules before an Envoy connects there (a name that rebinds to 127.0.0.1 or to a
// metadata address is left out), and sends the allowed addresses as endpoints: a changed answer is an
// endpoint update, as an EndpointSlice's is. Translation stays pure: the answers are an input it is given
// (translate.Refs.DNS), kept here and refreshed by RefreshDNS.
//
// The schedule is Envoy's DNS cluster's: each name is resolved again every refreshInterval (the shortest
// of the backends that name it), or with respectTTL when its answer's TTL runs out, clamped to
// [min(MinTTLRefresh, refreshInterval), MaxTTLRefresh]; a failed resolution keeps the last good addresses
// and is tried again at the refresh interval.

// MinTTLRefresh and MaxTTLRefresh clamp the TTL of an answer a backend with respectTTL follows: Envoy's
// own dns_min_refresh_rate is 5s, and an answer that asks to be kept for days is still checked hourly.
const (
	MinTTLRefresh = 5 * time.Second
	MaxTTLRefresh = time.Hour
)

// ResolveTimeout bounds how long a change waits for the first answers of host names it brings (the rest
// are resolved in the background and served when they come).
const ResolveTimeout = 3 * time.Second

// Resolver resolves one host name; the engine calls it without holding its lock, several at once.
type Resolver func(ctx context.Context, q translate.DNSQuery) (addrs []netip.Addr, ttl time.Duration, err error)

// dnsNames counts the backends that have lbplane resolve each name, with the refresh they ask for.
type dnsNames map[translate.DNSQuery]*dnsWant

type dnsWant struct {
	users int
	// refresh counts the users of each refresh interval, respectTTL those that follow the TTL.
	refresh    map[time.Duration]int
	respectTTL int
}

func (n *dnsNames) add(u translate.DNSUse) {
	if *n == nil {
		*n = dnsNames{}
	}
	w := (*n)[u.Query]
	if w == nil {
		w = &dnsWant{refresh: map[time.Duration]int{}}
		(*n)[u.Query] = w
	}
	w.users++
	w.refresh[u.Refresh]++
	if u.RespectTTL {
		w.respectTTL++
	}
}

func (n dnsNames) drop(u translate.DNSUse) {
	w := n[u.Query]
	if w == nil {
		return
	}
	w.users--
	if w.refresh[u.Refresh]--; w.refresh[u.Refresh] == 0 {
		delete(w.refresh, u.Refresh)
	}
	if u.RespectTTL {
		w.respectTTL--
	}
	if w.users == 0 {
		delete(n, u.Query)
	}
}

// interval is how long until the name is resolved again after an answer with ttl (0: none, or failed).
func (w *dnsWant) interval(ttl time.Duration) time.Duration {
	refresh := time.Duration(0)
	for r := range w.refresh {
		if refresh == 0 || (r > 0 && r < refresh) {
			refresh = r
		}
	}
	if refresh <= 0 {
		refresh = 5 * time.Second
	}
	if w.respectTTL > 0 && ttl > 0 {
		return min(max(ttl, min(MinTTLRefresh, refresh)), MaxTTLRefresh)
	}
	return refresh
}

// dnsState is what the engine holds of the names: the answers translation reads (replaced, never
// modified, on every change), and when each name is due.
type dnsState struct {
	answers map[translate.DNSQuery]translate.DNSAnswer
	due     map[translate.DNSQuery]time.Time
	// busy are the names being resolved now.
	busy map[translate.DNSQuery]bool
	// added are names answered for the first time since the last translation told of them.
	added []translate.DNSQuery
	// resolutions counts the resolutions made, for tests.
	resolutions int64
}

// resolveAll resolves queries at once, at most 16 at a time, within ResolveTimeout. Caller must not hold
// e.mu.
func (e *Engine) resolveAll(queries []translate.DNSQuery) map[translate.DNSQuery]dnsResult {
	out := make(map[translate.DNSQuery]dnsResult, len(queries))
	if e.Resolve == nil || len(queries) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, q := range queries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			addrs, ttl, err := e.Resolve(ctx, q)
			mu.Lock()
			out[q] = dnsResult{addrs: addrs, ttl: ttl, err: err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

type dnsResult struct {
	addrs []netip.Addr
	ttl   time.Duration
	err   error
}

// prefetchNames resolves, outside the lock, the host names of policies that were never resolved, so that
// a push or a load of the store or config directory is translated with their answers (and a push is
// refused at once when one is forbidden). The Kubernetes source does not wait for them: its changes come
// from the API server's watch, and the background refresh resolves a new name within a tick.
func (e *Engine) prefetchNames(policies []*v1alpha1.LoadBalancerPolicy) {
	if e.Resolve == nil {
		return
	}
	var want []translate.DNSQuery
	e.mu.Lock()
	for _, p := range e.notLoaded(policies) {
		for _, u := range policyDNS(p) {
			if _, ok := e.dns.answers[u.Query]; !ok && !slices.Contains(want, u.Query) {
				want = append(want, u.Query)
			}
		}
	}
	e.mu.Unlock()
	if len(want) == 0 {
		return
	}
	got := e.resolveAll(want)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyDNS(got, time.Now(), true)
}

// applyDNS takes resolutions into the answers and schedules the next ones; it returns the names whose
// answer changed. fresh takes only names never answered (prefetch). Caller holds e.mu.
func (e *Engine) applyDNS(got map[translate.DNSQuery]dnsResult, now time.Time, fresh bool) []translate.DNSQuery {
	var changed []translate.DNSQuery
	var next map[translate.DNSQuery]translate.DNSAnswer
	for q, r := range got {
		old, had := e.dns.answers[q]
		if fresh && had {
			continue
		}
		e.dns.resolutions++
		a := translate.DNSAnswer{Addrs: r.addrs}
		if r.err != nil {
			// The last good addresses stay, as Envoy keeps its hosts when a resolution fails.
			a = translate.DNSAnswer{Addrs: old.Addrs, Err: r.err.Error()}
			if len(old.Addrs) > 0 {
				a.Err = ""
				if had && old.Err == "" {
					e.log.Warn("a backend's host name did not resolve; keeping its last addresses", "name", q.Name, "error", r.err)
				}
			}
		}
		if w := e.fileUse.names[q]; w != nil {
			ttl := r.ttl
			if r.err != nil {
				ttl = 0
			}
			e.dns.due[q] = now.Add(w.interval(ttl))
		}
		if had && old.Err == a.Err && slices.Equal(old.Addrs, a.Addrs) {
			continue
		}
		if next == nil {
			next = make(map[translate.DNSQuery]translate.DNSAnswer, len(e.dns.answers)+len(got))
			for k, v := range e.dns.answers {
				if e.fileUse.names[k] != nil { // names nobody asks for any more are forgotten
					next[k] = v
				}
			}
		}
		next[q] = a
		changed = append(changed, q)
		if !had {
			e.dns.added = append(e.dns.added, q)
		}
	}
	if next != nil {
		e.dns.answers = next
	}
	return changed
}

// RefreshDNS resolves again the host names that are due at now and publishes the endpoints of those whose
// answer changed: only the policies that name them are translated again. It returns how many changed.
func (e *Engine) RefreshDNS(now time.Time) int {
	if e.Resolve == nil {
		return 0
	}
	var due []translate.DNSQuery
	e.mu.Lock()
	for q := range e.fileUse.names {
		if e.dns.busy[q] {
			continue
		}
		t, ok := e.dns.due[q]
		if _, answered := e.dns.answers[q]; !ok && answered {
			// Answered when its policy came (prefetch): due a refresh from now.
			e.dns.due[q] = now.Add(e.fileUse.names[q].interval(0))
			continue
		}
		if !ok || !now.Before(t) {
			due = append(due, q)
			e.dns.busy[q] = true
		}
	}
	for q := range e.dns.due {
		if e.fileUse.names[q] == nil {
			delete(e.dns.due, q)
		}
	}
	e.mu.Unlock()
	if len(due) == 0 {
		return 0
	}
	got := e.resolveAll(due)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range due {
		delete(e.dns.busy, q)
	}
	changed := e.applyDNS(got, time.Now(), false)
	if len(changed) == 0 {
		return 0
	}
	e.dns.added = nil
	e.rev++
	start := time.Now()
	all, origin, shadowed := e.mergeSources(e.sources)
	e.loadFiles(all)
	res := e.translator.TranslateChanged(all, e.refs(), translate.ChangedRefs{DNS: changed})
	e.publish(res, origin, shadowed, func() time.Duration { return time.Since(start) })
	e.log.Info("backends' host names resolved to other addresses; endpoints published", "names", len(changed))
	return len(changed)
}

// RunDNS refreshes the host names every tick until ctx ends.
func (e *Engine) RunDNS(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			e.RefreshDNS(now)
		}
	}
}

// DNSResolutions counts the resolutions the engine made, for tests.
func (e *Engine) DNSResolutions() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dns.resolutions
}
