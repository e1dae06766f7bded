package core_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A policy's text form is what configuration files and environment variables hold.
func ExampleParsePolicy() {
	p, err := core.ParsePolicy("500/2s, 2000/10s")
	fmt.Println(p, err)

	_, err = core.ParsePolicy("3/1m,5/soon")
	fmt.Println(err)
	// Output:
	// 500/2s,2000/10s <nil>
	// policy "3/1m,5/soon": at offset 5, "5/soon": bad period "soon": want a duration such as 1m, 2s, 500ms or 1d: reqlimit: bad policy
}

// A store decides for a key at an instant; with a manual clock the answers are exact and
// repeatable. The fourth request is refused, and RetryAfter says when the first grant
// leaves the window: 40s, not the whole minute.
func ExampleMemoryStore() {
	clock := storetest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	p, _ := core.ParsePolicy("3/1m")
	q := core.Query{Policy: p, Scope: "GET /user/test", Key: "192.0.2.1"}
	for i := 0; i < 4; i++ {
		d, _ := store.Decide(context.Background(), q)
		fmt.Printf("allowed=%v remaining=%d retry=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
		clock.Advance(10 * time.Second)
	}
	// Output:
	// allowed=true remaining=2 retry=0s
	// allowed=true remaining=1 retry=0s
	// allowed=true remaining=0 retry=0s
	// allowed=false remaining=0 retry=30s
}

// Several rates are decided together: a request needs room in every one, and the
// decision reports the tightest.
func ExampleNewPolicy() {
	p, _ := core.NewPolicy(core.Rate{Count: 2, Period: time.Second}, core.Rate{Count: 3, Period: time.Minute})
	clock := storetest.NewManualClock(time.Unix(0, 0))
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	q := core.Query{Policy: p, Key: "192.0.2.1"}
	for i := 0; i < 4; i++ {
		d, _ := store.Decide(context.Background(), q)
		fmt.Printf("t=%ds allowed=%v tightest=%s\n", i, d.Allowed, d.Rate)
		clock.Advance(time.Second)
	}
	// Output:
	// t=0s allowed=true tightest=2/1s
	// t=1s allowed=true tightest=3/1m
	// t=2s allowed=true tightest=3/1m
	// t=3s allowed=false tightest=3/1m
}

// When the store fails (a Redis that is down), the fail mode decides: FailOpen (the
// default) admits, FailClosed refuses, and FailLocal limits each instance on its own in
// memory until the store is back. The error hook hears of every failure.
func ExampleWithFailMode() {
	hook := core.WithErrorHook(func(_ context.Context, err error) { fmt.Println("hook:", errors.Unwrap(err)) })
	limit := nethttp.Limit(1, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailLocal), hook)
	h := limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code)
	}
	// Output:
	// hook: connection refused
	// 200
	// hook: connection refused
	// 429
}

// A Counter counts events over a sliding window, outside HTTP.
func ExampleCounter() {
	clock := storetest.NewManualClock(time.Unix(0, 0))
	failed, _ := core.NewCounter("failed-logins", 5, 15*time.Minute, core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now}))
	ctx := context.Background()
	failed.Add(ctx, "alice", 1)
	clock.Advance(10 * time.Minute)
	n, _ := failed.Add(ctx, "alice", 1)
	fmt.Println(n)
	clock.Advance(6 * time.Minute)
	n, _ = failed.Count(ctx, "alice")
	fmt.Println(n)
	// Output:
	// 2
	// 1
}

// A Quota resets a client's failed logins once it proves who it is, and reports what is
// left without spending any.
func ExampleQuota() {
	login := new(core.Quota)
	failed := nethttp.Limit(3, 15*time.Minute, core.WithScope("login"),
		core.WithKey(core.KeyByHeader("X-User")), core.WithQuota(login))
	mux := http.NewServeMux()
	mux.Handle("POST /login", failed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	try := func() int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-User", "alice")
		mux.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(try(), try(), try(), try())
	d, _ := login.Peek(context.Background(), "alice")
	fmt.Println("left:", d.Remaining, "wait:", d.RetryAfter.Round(time.Minute))

	_ = login.Reset(context.Background(), "alice") // say, after a password reset
	d, _ = login.Peek(context.Background(), "alice")
	fmt.Println("left:", d.Remaining, "then", try())
	// Output:
	// 200 200 200 429
	// left: 0 wait: 15m0s
	// left: 3 then 200
}

// Plans chosen per request: free clients 2 per minute (the limit's own policy), paid ones
// 5, internal ones unlimited. The plan comes from the application's authentication, which
// stores it in the request's context: never from a header the client writes, or any client
// could name itself internal. A request with no plan, or one not declared, is free.
func ExampleWithTiers() {
	type planKey struct{}
	plan := func(r core.Request) string { p, _ := r.Value(planKey{}).(string); return p }
	limit := nethttp.Limit(2, time.Minute, fresh(),
		core.WithTiers(plan, map[string]string{"paid": "5/1m", "internal": "unlimited"}))
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	// Authentication, before the limit: an API key the server knows names the plan.
	plans := map[string]string{"key-paid": "paid", "key-internal": "internal"}
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := plans[r.Header.Get("X-API-Key")]; ok {
			r = r.WithContext(context.WithValue(r.Context(), planKey{}, p))
		}
		h.ServeHTTP(w, r)
	})
	send := func(apiKey string) string {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", apiKey)
		auth.ServeHTTP(w, r)
		return fmt.Sprint(w.Code, " ", w.Header().Get("RateLimit"))
	}
	fmt.Println(send(""), "|", send("key-paid"), "|", send("key-internal"), "|", send("internal"), "|", send(""))
	// Output:
	// 200 "2/1m";r=1;t=60 | 200 "5/1m";r=4;t=60 | 200  | 200 "2/1m";r=0;t=60 | 429 "2/1m";r=0;t=60
}

// Login protection: only failed attempts count, 3 per 15 minutes. Successful logins give
// their slot back, so a user who signs in is never slowed down.
func ExampleWithCountWhen() {
	limit := nethttp.Limit(3, 15*time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed))
	login := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	try := func(password string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/login", nil)
		r.Header.Set("X-Password", password)
		login.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(try("s3cret"), try("s3cret"), try("s3cret"), try("s3cret"))
	fmt.Println(try("guess"), try("guess"), try("guess"), try("guess"), try("s3cret"))
	// Output:
	// 200 200 200 200
	// 401 401 401 429 429
}

// An allow list exempts clients by address, read as the key reads it: here the office's
// network is not limited, everyone else gets 1 request a minute.
func ExampleWithAllowList() {
	limit := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithAllowList("10.0.0.0/8", "::1/128"))
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	send := func(remote string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "10.0.0.1") // forged: not a trusted proxy's
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println("office:", send("10.1.2.3:4000"), send("10.1.2.3:4000"), send("10.1.2.3:4000"))
	fmt.Println("others:", send("192.0.2.1:4000"), send("192.0.2.1:4000"))
	// Output:
	// office: 200 200 200
	// others: 200 429
}

// Two limits on one request, a group-wide one and the route's own: each adds its member
// to the RateLimit fields (draft-ietf-httpapi-ratelimit-headers-11).
func Example_stackedLimits() {
	store := core.WithStore(core.NewMemoryStore(nil))
	api := nethttp.Limit(100, time.Hour, store, core.WithScope("api"))
	search := nethttp.Limit(3, time.Minute, store)
	h := api(search(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
	fmt.Println(w.Header().Values("RateLimit-Policy"))
	fmt.Println(w.Header().Values("RateLimit"))
	// Output:
	// ["100/1h";q=100;w=3600 "3/1m";q=3;w=60]
	// ["100/1h";r=99;t=3600 "3/1m";r=2;t=60]
}

// fresh gives an example a store of its own, on a clock that stands still, so that the
// waits it prints (t=60) do not shrink on a machine that stalls between requests;
// applications normally share the process-wide default store, on the real clock.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}
