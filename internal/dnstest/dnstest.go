// Package dnstest runs a DNS server on loopback for tests: it answers A and AAAA queries for the names a
// test sets, with the TTL it sets, and NXDOMAIN for every other name.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// Server is a DNS server on 127.0.0.1 (UDP and TCP on the same port).
type Server struct {
	// Addr is host:port.
	Addr    string
	mu      sync.Mutex
	names   map[string]record
	fail    bool
	Queries atomic.Int64
}

type record struct {
	addrs []netip.Addr
	ttl   uint32
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	// UDP and TCP on one port: the kernel picks the UDP port, whose TCP twin another process may hold;
	// then another port is tried (bounded).
	var pc net.PacketConn
	var lis net.Listener
	for attempt := 0; lis == nil; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if lis, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			pc.Close()
			if attempt == 20 {
				t.Fatalf("no port free for both UDP and TCP after 20 tries: %v", err)
			}
		}
	}
	s := &Server{Addr: pc.LocalAddr().String(), names: map[string]record{}}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: dns.HandlerFunc(s.serve)}, {Listener: lis, Handler: dns.HandlerFunc(s.serve)}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return s
}

// Set makes name answer addrs (A and AAAA records by family) with ttl seconds; no addresses removes it.
func (s *Server) Set(name string, ttl uint32, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := strings.ToLower(dns.Fqdn(name))
	if len(addrs) == 0 {
		delete(s.names, n)
		return
	}
	r := record{ttl: ttl}
	for _, a := range addrs {
		r.addrs = append(r.addrs, netip.MustParseAddr(a))
	}
	s.names[n] = r
}

// Fail makes every query answer SERVFAIL while on.
func (s *Server) Fail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = on
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	s.Queries.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.fail:
		m.Rcode = dns.RcodeServerFailure
	case len(req.Question) != 1:
		m.Rcode = dns.RcodeFormatError
	default:
		q := req.Question[0]
		r, ok := s.names[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
			break
		}
		for _, a := range r.addrs {
			h := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: r.ttl}
			switch {
			case a.Is4() && q.Qtype == dns.TypeA:
				h.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: h, A: net.IP(a.AsSlice())})
			case a.Is6() && q.Qtype == dns.TypeAAAA:
				h.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: h, AAAA: net.IP(a.AsSlice())})
			}
		}
	}
	w.WriteMsg(m)
}
