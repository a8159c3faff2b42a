package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lbplane/lbplane/api/v1alpha1"
	"github.com/lbplane/lbplane/controlplane/explain"
	"github.com/lbplane/lbplane/controlplane/objkey"
	"github.com/lbplane/lbplane/controlplane/pushapi"
	"github.com/lbplane/lbplane/controlplane/xdsserver"
)

const (
	admin    = "admin-token-0123456789"
	readOnly = "read-token-0123456789"
)

func testServer() *Server {
	p := &v1alpha1.LoadBalancerPolicy{}
	p.Namespace, p.Name = "default", "demo"
	return &Server{Token: admin, ReadOnlyToken: readOnly,
		Policies: func() []*v1alpha1.LoadBalancerPolicy { return []*v1alpha1.LoadBalancerPolicy{p} },
		Proxies:  func(context.Context) []xdsserver.ProxyStatus { return nil },
		Explain: func(objkey.Key) (*explain.Explanation, error) {
			return &explain.Explanation{Policy: "default/demo"}, nil
		},
		Live: func(objkey.Key) (*pushapi.LiveResult, error) {
			return &pushapi.LiveResult{Policy: "default/demo"}, nil
		}}
}

// client does not follow redirects, so that each answer can be checked.
func client() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func sessionCookie(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	return nil
}

func get(t *testing.T, srv *httptest.Server, path string, c *http.Cookie) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var dataPaths = []string{"api/state", "api/policies/default/demo", "api/events?policy=default/demo"}

func TestLoginFormGivesASessionCookie(t *testing.T) {
	for _, tok := range []string{admin, readOnly} {
		srv := httptest.NewServer(testServer().Handler())
		resp, err := client().PostForm(srv.URL+Prefix+"login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c := sessionCookie(t, resp)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Prefix || c == nil {
			t.Fatalf("login: %s, Location %q, cookie %v", resp.Status, resp.Header.Get("Location"), c)
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != Prefix || c.Secure || strings.Contains(c.Value, tok) {
			t.Errorf("cookie attributes: %+v", c)
		}
		if r := get(t, srv, Prefix+"api/state", c); r.StatusCode != http.StatusOK {
			t.Errorf("with the session: %s", r.Status)
		}
		if r := get(t, srv, Prefix, c); r.StatusCode != 200 || !strings.Contains(readAll(t, r), "app.js") {
			t.Error("the app is not served to a session")
		}
		srv.Close()
	}
}

func readAll(t *testing.T, r *http.Response) string {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWrongTokenGetsNoData(t *testing.T) {
	srv := httptest.NewServer(testServer().Handler())
	defer srv.Close()
	for _, tok := range []string{"", "wrong", admin + "x", "Bearer " + admin} {
		resp, err := client().PostForm(srv.URL+Prefix+"login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || sessionCookie(t, resp) != nil {
			t.Errorf("login with %q: %s, cookie %v", tok, resp.Status, sessionCookie(t, resp))
		}
		if r := get(t, srv, Prefix+"?token="+url.QueryEscape(tok), nil); r.StatusCode != http.StatusUnauthorized || sessionCookie(t, r) != nil {
			t.Errorf("?token=%q: %s", tok, r.Status)
		}
	}
	forged := &http.Cookie{Name: CookieName, Value: strings.Repeat("a", 64)}
	for _, p := range dataPaths {
		for _, c := range []*http.Cookie{nil, forged} {
			if r := get(t, srv, Prefix+p, c); r.StatusCode != http.StatusUnauthorized || strings.Contains(readAll(t, r), "demo") {
				t.Errorf("%s with cookie %v: %s", p, c, r.Status)
			}
		}
	}
	// Without a session the page is the login form, with no data in it.
	if body := readAll(t, get(t, srv, Prefix, nil)); !strings.Contains(body, `name="token"`) || strings.Contains(body, "demo") {
		t.Errorf("login page: %s", body)
	}
}

func TestTokenExchangeRedirectsToACleanURL(t *testing.T) {
	srv := httptest.NewServer(testServer().Handler())
	defer srv.Close()
	r := get(t, srv, Prefix+"?token="+readOnly, nil)
	c := sessionCookie(t, r)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != Prefix || c == nil {
		t.Fatalf("%s, Location %q", r.Status, r.Header.Get("Location"))
	}
	if r.Header.Get("Referrer-Policy") != "same-origin" {
		t.Error("a ?token= page must not send it on as a Referer")
	}
	// The event stream answers with the state.
	ev := get(t, srv, Prefix+"api/events?policy=default/demo", c)
	if ev.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s %s", ev.Status, ev.Header.Get("Content-Type"))
	}
	line, _ := bufio.NewReader(ev.Body).ReadString('\n')
	if line != "event: state\n" {
		t.Errorf("first event line %q", line)
	}
	// Logging out ends the session.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Prefix+"logout", nil)
	req.AddCookie(c)
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := get(t, srv, Prefix+"api/state", c); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %s", r.Status)
	}
}

func TestCrossSiteLoginIsRefused(t *testing.T) {
	srv := httptest.NewServer(testServer().Handler())
	defer srv.Close()
	for _, h := range []map[string]string{{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "Origin": "http://" + strings.TrimPrefix(srv.URL, "http://")}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Prefix+"login", strings.NewReader(url.Values{"token": {admin}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || sessionCookie(t, resp) != nil {
			t.Errorf("%v: %s", h, resp.Status)
		}
	}
}

func TestCookieIsSecureOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(testServer().Handler())
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(srv.URL+Prefix+"login", url.Values{"token": {admin}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ck := sessionCookie(t, resp); ck == nil || !ck.Secure {
		t.Errorf("cookie over TLS: %+v", ck)
	}
}

func TestOneTimeCodeLogsInOnce(t *testing.T) {
	srv := httptest.NewServer(testServer().Handler())
	defer srv.Close()
	mint := func(auth string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Prefix+"login-code", nil)
		req.Header.Set("Authorization", auth)
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := mint("Bearer wrong"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token minted a code: %s", r.Status)
	}
	body := readAll(t, mint("Bearer "+readOnly))
	_, code, ok := strings.Cut(body, `"code":"`)
	code, _, _ = strings.Cut(code, `"`)
	if !ok || len(code) != 64 {
		t.Fatalf("answer %s", body)
	}
	if r := get(t, srv, Prefix+"?code="+code, nil); r.StatusCode != http.StatusSeeOther || sessionCookie(t, r) == nil {
		t.Fatalf("code exchange: %s", r.Status)
	}
	if r := get(t, srv, Prefix+"?code="+code, nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a code worked twice: %s", r.Status)
	}
}

func TestTokenGuessingIsThrottled(t *testing.T) {
	s := testServer()
	s.RateLimit = 1 // burst 3
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	codes := map[int]int{}
	for range 6 {
		resp, err := client().PostForm(srv.URL+Prefix+"login", url.Values{"token": {"guess"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusUnauthorized] == 0 {
		t.Errorf("six quick guesses: %v", codes)
	}
}
