// Package exampletest checks the example applications, which all declare the same limits:
// GET /user/test 3 a minute, GET /search 5 a second and 20 a minute, GET /api/data 10 a
// minute per X-API-Token the application issued (100 for pro tokens, none for internal
// ones) and per IP for any other request, and POST /login 5 failed attempts per 15 minutes.
package exampletest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

var clients atomic.Uint32

// NextRemote returns a "host:port" remote address no earlier call returned, from the
// 10.0.0.0/8 documentation-free test range (the address never reaches a network).
func NextRemote() string {
	n := clients.Add(1)
	return fmt.Sprintf("10.%d.%d.%d:4321", n>>16&255, n>>8&255, n&255)
}

// A Reply is what the application answered a request.
type Reply struct {
	Status                                   int
	RetryAfter, RateLimit, ContentType, Body string
}

// Send sends the application one GET request with header name, value pairs.
type Send func(t *testing.T, path string, header ...string) Reply

// HTTP returns a Send for a net/http handler (net/http, Gin, Echo), through httptest. Each
// Send function is a client of its own, with an address no other has used in this process:
// the examples count in the process-wide default store, which outlives one test run
// (go test -count=2).
func HTTP(h http.Handler) Send {
	remote := NextRemote()
	return func(_ *testing.T, path string, header ...string) Reply {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return Reply{w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Header().Get("Content-Type"), w.Body.String()}
	}
}

// Fasthttp returns a Send for a fasthttp handler (Fiber), called in-process through
// fasthttp's own request context: Fiber's app.Test would report every client as 0.0.0.0,
// and the examples count per client address. Like HTTP's, each is a client of its own.
func Fasthttp(handler fasthttp.RequestHandler) Send {
	remote, err := net.ResolveTCPAddr("tcp", NextRemote())
	if err != nil {
		panic(err)
	}
	return func(_ *testing.T, path string, header ...string) Reply {
		var req fasthttp.Request
		req.SetRequestURI(path)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, remote, nil)
		handler(&ctx)
		h := &ctx.Response.Header
		return Reply{ctx.Response.StatusCode(), string(h.Peek("Retry-After")), string(h.Peek("RateLimit")), string(h.ContentType()), string(ctx.Response.Body())}
	}
}

// Check drives a freshly built example application through its limits. issue adds an API
// token to those the application issued, on a plan ("free", "pro" or "internal").
func Check(t *testing.T, get Send, issue func(token, plan string)) {
	for i := 1; i <= 4; i++ {
		r := get(t, "/user/test")
		if want := map[bool]int{true: 429, false: 200}[i == 4]; r.Status != want {
			t.Fatalf("/user/test request %d: status %d, want %d", i, r.Status, want)
		}
		if i == 4 && r.RetryAfter == "" {
			t.Fatal("the 429 has no Retry-After")
		}
	}
	// 5 a second: the 6th request is refused when all six fall within a second. A machine
	// stalled for a second on the way lets the first leave the window, and the answer
	// says nothing: then again, once the window is empty (20 a minute leaves room for 3).
	for attempt := 1; ; attempt++ {
		start := time.Now()
		var codes []int
		for range 6 {
			codes = append(codes, get(t, "/search").Status)
		}
		took := time.Since(start)
		if !slices.Contains(codes[:5], 429) && codes[5] == 429 {
			break
		}
		if slices.Contains(codes[:5], 429) || took < time.Second || attempt == 3 {
			t.Fatalf("/search: statuses %v in %v, want 5 admitted, then 429", codes, took)
		}
		t.Logf("/search: statuses %v in %v: the first may have left the window; again", codes, took)
		time.Sleep(time.Second)
	}
	// Tokens of this run only: the default store outlives it.
	a, b := "token-a-"+NextRemote(), "token-b-"+NextRemote()
	issue(a, "free")
	issue(b, "free")
	for i := 1; i <= 10; i++ {
		if code := get(t, "/api/data", "X-API-Token", a).Status; code != 200 {
			t.Fatalf("token a's request %d: status %d, want 200", i, code)
		}
	}
	checkJSONRefusal(t, get(t, "/api/data", "X-API-Token", a))
	if code := get(t, "/api/data", "X-API-Token", b).Status; code != 200 {
		t.Fatalf("token b: status %d, want 200", code)
	}
	// Without a token, or with one the application never issued, the client's IP is the
	// key: a made-up token must not buy a fresh quota.
	if code := get(t, "/api/data").Status; code != 200 {
		t.Fatalf("no token (keyed by IP): status %d, want 200", code)
	}
	for i := 2; i <= 11; i++ {
		want := map[bool]int{true: 429, false: 200}[i == 11]
		if code := get(t, "/api/data", "X-API-Token", fmt.Sprintf("made-up-%d-%s", i, NextRemote())).Status; code != want {
			t.Fatalf("request %d from one IP, with a token never issued: status %d, want %d (keyed by the IP, 10 a minute)", i, code, want)
		}
	}
	// Plans: a pro token has 100 a minute, an internal one no limit; the plan is the
	// token's as issued, not read from its text.
	pro, internal := "pro-"+NextRemote(), "internal-"+NextRemote()
	issue(pro, "pro")
	issue(internal, "internal")
	if code := get(t, "/api/data", "X-API-Token", "internal-"+NextRemote()).Status; code != 429 {
		t.Fatalf("a made-up internal- token from the spent IP: status %d, want 429", code)
	}
	for i := 1; i <= 101; i++ {
		want := map[bool]int{true: 429, false: 200}[i == 101]
		if code := get(t, "/api/data", "X-API-Token", pro).Status; code != want {
			t.Fatalf("pro token's request %d: status %d, want %d (100 a minute)", i, code, want)
		}
	}
	// Past any app-wide limit of 100 a minute per client and route (chi's): a plan is the
	// token's whole limit.
	for i := 1; i <= 120; i++ {
		if code := get(t, "/api/data", "X-API-Token", internal).Status; code != 200 {
			t.Fatalf("internal token's request %d: status %d, want 200 (unlimited)", i, code)
		}
	}
}

// checkJSONRefusal checks /api/data's refusal, which API clients read as JSON: 429, a JSON
// body whose retry_after is the Retry-After field's, and the RateLimit field kept.
func checkJSONRefusal(t *testing.T, r Reply) {
	t.Helper()
	var body struct {
		Error      string `json:"error"`
		RetryAfter int    `json:"retry_after"`
	}
	if r.Status != 429 {
		t.Fatalf("token a's 11th request: status %d, want 429", r.Status)
	}
	if !strings.HasPrefix(r.ContentType, "application/json") {
		t.Fatalf("/api/data's refusal: Content-Type %q, want application/json", r.ContentType)
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body.Error == "" {
		t.Fatalf("/api/data's refusal: body %q is not the JSON refusal (%v)", r.Body, err)
	}
	if strconv.Itoa(body.RetryAfter) != r.RetryAfter || body.RetryAfter < 1 {
		t.Fatalf("/api/data's refusal: retry_after %d, Retry-After field %q: want the same whole seconds", body.RetryAfter, r.RetryAfter)
	}
	if !strings.Contains(r.RateLimit, "r=0") {
		t.Fatalf("/api/data's refusal: RateLimit field %q, want the spent quota's", r.RateLimit)
	}
}

// CheckLogin checks an example's login limit, 5 failed attempts per 15 minutes (only
// failures count): with the right password login succeeds 6 times, then 5 wrong ones get
// 401, a 6th is refused, and until the failures leave the window so is the right password.
func CheckLogin(t *testing.T, password string, login func(password string) int) {
	t.Helper()
	for i := 1; i <= 6; i++ {
		if code := login(password); code != 200 {
			t.Fatalf("login %d: status %d, want 200: successes must not count", i, code)
		}
	}
	for i := 1; i <= 5; i++ {
		if code := login("guess"); code != 401 {
			t.Fatalf("failed attempt %d: status %d, want 401", i, code)
		}
	}
	if code := login("guess"); code != 429 {
		t.Fatalf("6th failed attempt: status %d, want 429", code)
	}
	if code := login(password); code != 429 {
		t.Fatalf("the right password after 5 failures: status %d, want 429", code)
	}
}

// CheckLoginHTTP is CheckLogin through a net/http handler (net/http, Gin, Echo), with a
// client address no other test has used.
func CheckLoginHTTP(t *testing.T, h http.Handler, password string) {
	t.Helper()
	remote := NextRemote()
	CheckLogin(t, password, func(pw string) int {
		r := httptest.NewRequest("POST", "/login", strings.NewReader(loginForm(pw)))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	})
}

// CheckLoginFasthttp is CheckLogin through a fasthttp handler (Fiber's app.Handler()).
func CheckLoginFasthttp(t *testing.T, handler fasthttp.RequestHandler, password string) {
	t.Helper()
	remote, err := net.ResolveTCPAddr("tcp", NextRemote())
	if err != nil {
		t.Fatal(err)
	}
	CheckLogin(t, password, func(pw string) int {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/login")
		req.Header.SetContentType("application/x-www-form-urlencoded")
		req.SetBodyString(loginForm(pw))
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, remote, nil)
		handler(&ctx)
		return ctx.Response.StatusCode()
	})
}

func loginForm(password string) string { return url.Values{"password": {password}}.Encode() }

// CheckTimeouts fails t for each timeout that is not set: without it a client holds a
// connection at that stage (sending its request slowly, idling between requests) as long
// as it likes, and a limit only sees a request once it is read.
func CheckTimeouts(t *testing.T, timeouts map[string]time.Duration) {
	t.Helper()
	for name, d := range timeouts {
		if d <= 0 {
			t.Errorf("the server's %s is %v: a client can hold a connection at that stage forever", name, d)
		}
	}
}

// CheckServer is CheckTimeouts for a net/http server.
func CheckServer(t *testing.T, srv *http.Server) {
	t.Helper()
	CheckTimeouts(t, map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout,
		"ReadTimeout": srv.ReadTimeout, "WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout})
}
