package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// TestLimitInSynctestBubble is docs/operations.md's "Testing code that uses limits": a
// limit whose store is made inside a testing/synctest bubble keeps the bubble's time, so
// a test waits out the window with time.Sleep, at once.
func TestLimitInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		mux := http.NewServeMux()
		mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)))(ok))
		get := func() int {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("GET", "/user/test", nil))
			return w.Code
		}
		for range 3 {
			if code := get(); code != http.StatusOK {
				t.Fatalf("status %d within the limit, want 200", code)
			}
		}
		if code := get(); code != http.StatusTooManyRequests {
			t.Fatalf("status %d for the 4th request in a minute, want 429", code)
		}
		time.Sleep(time.Minute)
		if code := get(); code != http.StatusOK {
			t.Fatalf("status %d once the bubble's minute passed, want 200: the store is not on the bubble's clock", code)
		}
	})
}
