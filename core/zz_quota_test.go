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
