package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// TestStackedRefusalsRetryAfterNeverKeepsAClientWaiting: where limits stack (an app-wide
// limit before a route's), a refusal's Retry-After is the refusing limit's own wait. A
// limit before it that counted the request and has nothing left refuses a retry made
// sooner, with its own wait: a client that follows Retry-After gets through as soon as
// every limit has room, never later. Raising the wait from the earlier limits' fields
// kept a client waiting an hour for nothing behind a dry-run limit (which never refuses)
// and behind a WithCountWhen limit (which gives its grant back).
func TestStackedRefusalsRetryAfterNeverKeepsAClientWaiting(t *testing.T) {
	for _, c := range []struct {
		name    string
		outer   []core.Option
		outerN  int
		outerT  time.Duration
		sends   int           // requests at once before following Retry-After
		waits   []int         // the Retry-After values a client then follows, in seconds
		through time.Duration // when every limit has room again
	}{
		{"enforced 3/1m before 1/10s", nil, 3, time.Minute, 3, []int{10, 50}, time.Minute},
		{"dry-run 1/1h before 1/10s", []core.Option{core.WithDryRun()}, 1, time.Hour, 2, []int{10}, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := storetest.NewManualClock(time.Unix(1_000_000, 0))
			store := core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now}))
			appWide := adapter.Must(c.outerN, c.outerT, append([]core.Option{store, core.WithScope("api")}, c.outer...)...)
			route := adapter.Must(1, 10*time.Second, store)
			in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req()}
			send := func() (bool, adapter.HeaderMap) {
				h := adapter.HeaderMap{}
				for _, l := range []adapter.Limiter{appWide, route} {
					if !l.Check(context.Background(), in, h).Allowed {
						return false, h
					}
				}
				return true, h
			}
			var ok bool
			var h adapter.HeaderMap
			for range c.sends {
				ok, h = send()
			}
			waited := time.Duration(0)
			for i, want := range c.waits {
				if ok {
					t.Fatalf("admitted before Retry-After %d", i+1)
				}
				secs, err := strconv.Atoi(h.Values(hook.HeaderRetryAfter)[0])
				if err != nil || secs != want {
					t.Fatalf("Retry-After %d: %q (RateLimit %q), want %d", i+1, h.Values(hook.HeaderRetryAfter), h.Values(hook.HeaderRateLimit), want)
				}
				clock.Advance(time.Duration(secs) * time.Second)
				waited += time.Duration(secs) * time.Second
				ok, h = send()
			}
			if !ok || waited != c.through {
				t.Fatalf("after following Retry-After for %v: admitted %v, want admitted after %v", waited, ok, c.through)
			}
		})
	}
}
