package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// The RateLimit field's t is when the oldest grant the rate counts leaves its window, also
// for a rate above 256 per period (counted in buckets). It was when the window's oldest
// bucket left, whether or not it held a grant: a client that spent a 300/1h quota at once
// was told r=0;t=26, and 26 s later refused for an hour.
func TestRateLimitTOfABucketedRate(t *testing.T) {
	for _, count := range []int{256, 300} {
		clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
		store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
		h := nethttp.Limit(count, time.Hour, core.WithStore(store))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		clock.Advance(2*time.Hour + 10*time.Second) // a store that has run a while, as a Redis server's clock has
		send := func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/api", nil))
			return w
		}
		var last *httptest.ResponseRecorder
		for range count {
			last = send()
		}
		field := last.Header().Get("RateLimit")
		var r, tv int
		if _, err := fmt.Sscanf(field[strings.Index(field, ";"):], ";r=%d;t=%d", &r, &tv); err != nil {
			t.Fatalf("%q: %v", field, err)
		}
		clock.Advance(time.Duration(tv) * time.Second)
		next := send()
		if r == 0 && next.Code == http.StatusTooManyRequests {
			t.Errorf("%d/1h: the last grant's RateLimit is %q, but %d s later the next request is refused with Retry-After %s: t is not when the oldest counted grant leaves",
				count, field, tv, next.Header().Get("Retry-After"))
		}
	}
}
