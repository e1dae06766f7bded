package core_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// The RateLimit field follows draft-ietf-httpapi-ratelimit-headers-11: t is the time within
// which no more than r fit, for a sliding log until the oldest grant leaves the window, and
// on a refusal Retry-After agrees with it. Grants at 0, 20 and 40 s of 3/1m, then a request
// at 41 s: t=19 and Retry-After 19 (t was 59, until the quota was whole).
func TestRateLimitFieldTIsUntilTheQuotaGrows(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_000_000, 0))
	l := adapter.Must(3, time.Minute, core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})))
	in := adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}
	var last time.Duration
	for _, s := range []struct {
		at               time.Duration
		rateLimit, retry string
	}{
		{0, `"3/1m";r=2;t=60`, ""},
		{20 * time.Second, `"3/1m";r=1;t=40`, ""},
		{40 * time.Second, `"3/1m";r=0;t=20`, ""},
		{41 * time.Second, `"3/1m";r=0;t=19`, "19"},
		{60 * time.Second, `"3/1m";r=0;t=20`, ""}, // the first grant has left; a new one is at 60 s
	} {
		clock.Advance(s.at - last)
		last = s.at
		h := http.Header{}
		l.Check(context.Background(), in, adapter.HeaderMap(h))
		if got := h.Get("RateLimit"); got != s.rateLimit {
			t.Errorf("at %v: RateLimit %q, want %q", s.at, got, s.rateLimit)
		}
		if got := h.Get("Retry-After"); got != s.retry {
			t.Errorf("at %v: Retry-After %q, want %q", s.at, got, s.retry)
		}
	}
}
