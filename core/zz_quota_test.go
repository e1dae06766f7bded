package core_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Review: Peek ignores WithTiers. A client on the "paid" tier that has used up its
// 5/1m is still reported by Quota.Peek as having the free policy's whole quota
// (Allowed, Remaining 2), although its next request is refused. docs/operations.md
// "Resetting and looking up a client" promises "how much is left, recording nothing".
func TestZZQuotaPeekSeesTheTierThatLimits(t *testing.T) {
	q := new(core.Quota)
	plan := func(r core.Request) string { return r.Header("X-Plan") }
	h := nethttp.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithScope("zz-peek-tiers"), core.WithQuota(q),
		core.WithTiers(plan, map[string]string{"paid": "5/1m"}))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func() int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		r.Header.Set("X-Plan", "paid")
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 5 {
		send()
	}
	if c := send(); c != 429 {
		t.Fatalf("6th paid request: %d, want 429", c)
	}
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 {
		t.Errorf("Peek after the paid tier is exhausted: Allowed=%v Remaining=%d Rate=%v; the next request is refused, want Allowed=false Remaining=0",
			d.Allowed, d.Remaining, d.Rate)
	}
}

// Review: a limit keyed by a function (here KeyByHeader) counts requests without a key by
// the client's address. Quota.Reset finds that bucket by the address ("which Reset also
// finds where a key function gave none"), but Quota.Peek with the same address reports a
// fresh quota while the client is refused.
func TestZZQuotaPeekFindsTheAddressFallback(t *testing.T) {
	q := new(core.Quota)
	h := nethttp.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithScope("zz-peek-fallback"), core.WithQuota(q),
		core.WithKey(core.KeyByHeader("X-API-Token")))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func() int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		h.ServeHTTP(w, r)
		return w.Code
	}
	send()
	send()
	if c := send(); c != 429 {
		t.Fatalf("3rd request: %d, want 429", c)
	}
	d, err := q.Peek(context.Background(), "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Errorf("Peek(192.0.2.7) = Allowed, Remaining %d; the client is refused", d.Remaining)
	}
}
