package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/lbplane/lbplane/controlplane/pushapi"
)

// CookieName is the session cookie. It holds a random session id, never the token.
const CookieName = "lbplane_session"

// SessionTTL is how long a login lasts.
const SessionTTL = 12 * time.Hour

// maxSessions bounds the memory logins can take; past it the oldest session is dropped.
const maxSessions = 1024

type session struct {
	role    pushapi.Role
	expires time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[string]session
	// codes are one-time login codes (lbctl dashboard): a URL that is printed or handed to a browser holds
	// one of these, used once within CodeTTL, never the token itself.
	codes map[string]session
}

// CodeTTL is how long a one-time login code is valid.
const CodeTTL = time.Minute

func (ss *sessions) createCode(role pushapi.Role, now time.Time) string {
	b := make([]byte, 32)
	rand.Read(b)
	id := hex.EncodeToString(b)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.codes == nil {
		ss.codes = map[string]session{}
	}
	for k, v := range ss.codes {
		if now.After(v.expires) {
			delete(ss.codes, k)
		}
	}
	if len(ss.codes) >= maxSessions {
		return ""
	}
	ss.codes[id] = session{role: role, expires: now.Add(CodeTTL)}
	return id
}

// useCode returns the code's role and forgets the code.
func (ss *sessions) useCode(code string, now time.Time) pushapi.Role {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.codes[code]
	delete(ss.codes, code)
	if !ok || now.After(s.expires) {
		return pushapi.RoleNone
	}
	return s.role
}

// postCode mints a one-time login code for a bearer token (lbctl dashboard).
func (s *Server) postCode(w http.ResponseWriter, r *http.Request) {
	role := pushapi.RoleOf(r.Header.Get("Authorization"), s.Token, s.ReadOnlyToken)
	if !s.limits.AllowFor(r, role.Credential(), s.RateLimit) {
		tooMany(w)
		return
	}
	if role == pushapi.RoleNone {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lbplane"`)
		http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
		return
	}
	code := s.sessions.createCode(role, time.Now())
	if code == "" {
		http.Error(w, "too many unused login codes; try again in a minute", http.StatusTooManyRequests)
		return
	}
	writeJSON(w, map[string]string{"code": code, "path": Prefix + "?code=" + code})
}

func (ss *sessions) create(role pushapi.Role, now time.Time) string {
	b := make([]byte, 32)
	rand.Read(b)
	id := hex.EncodeToString(b)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]session{}
	}
	if len(ss.m) >= maxSessions {
		oldest := ""
		for k, v := range ss.m {
			if oldest == "" || v.expires.Before(ss.m[oldest].expires) {
				oldest = k
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[id] = session{role: role, expires: now.Add(SessionTTL)}
	return id
}

func (ss *sessions) lookup(id string, now time.Time) pushapi.Role {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if !ok {
		return pushapi.RoleNone
	}
	if now.After(s.expires) {
		delete(ss.m, id)
		return pushapi.RoleNone
	}
	return s.role
}

func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many login attempts; slow down", http.StatusTooManyRequests)
}

// role returns the request's session role; RoleNone without a live session.
func (s *Server) role(r *http.Request) pushapi.Role {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return pushapi.RoleNone
	}
	return s.sessions.lookup(c.Value, time.Now())
}

// tokenRole checks a token as the push API does (both tokens compared in constant time).
func (s *Server) tokenRole(token string) pushapi.Role {
	if token == "" {
		return pushapi.RoleNone
	}
	return pushapi.RoleOf("Bearer "+token, s.Token, s.ReadOnlyToken)
}

// login starts a session: HttpOnly (scripts never see it), SameSite=Strict (no other site's page can make
// the browser send it), Secure when the API serves TLS, and scoped to the dashboard's path.
func (s *Server) login(w http.ResponseWriter, r *http.Request, role pushapi.Role) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.sessions.create(role, time.Now()), Path: Prefix,
		MaxAge: int(SessionTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	// 303: the browser follows with a GET of the clean URL, so neither the token nor the form is replayed
	// by a reload, and the address bar and history hold no secret.
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// sameOrigin refuses cross-site form posts (login CSRF, forced logout). Browsers send Sec-Fetch-Site with
// every request, and it is what decides; without it, an Origin must name this host ("null", from a sandboxed
// frame or a no-referrer page, does not). A client that sends neither (curl) is not a browser a page could
// drive.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func (s *Server) postLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	role := s.tokenRole(r.PostFormValue("token"))
	if !s.limits.AllowFor(r, role.Credential(), s.RateLimit) {
		tooMany(w)
		return
	}
	if role == pushapi.RoleNone {
		s.loginPage(w, http.StatusUnauthorized, "wrong token")
		return
	}
	s.login(w, r, role)
}

func (s *Server) postLogout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(CookieName); err == nil {
		s.sessions.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// requireSession answers 401 to every data call without a live session: a wrong token gets no data.
func (s *Server) requireSession(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.role(r) == pushapi.RoleNone {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":["log in to the dashboard first"]}` + "\n"))
			return
		}
		h(w, r)
	}
}
