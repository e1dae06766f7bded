package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// reset.lua fences a key at the server's raw TIME, but the decision scripts record grants at
// the key's clock, which is clamped forward to the newest grant / last decision ("time never
// runs backwards for a key", docs/redis.md: a failover to a node whose clock lags). When the
// clock a reset reads is behind the key's (the clamp was in effect), a grant recorded before
// the reset carries a time later than the fence, so release.lua does not recognise it as
// forgotten: it then takes a grant made after the reset in the same bucket (bounded) or unit
// (compact) for it, and gives that one back: N+1 admissions in one window.
//
// The test clock (WithClock) stands in for the server's TIME stepping back by 5 s (bounded,
// whose bucket is 36 s) or 100 ms (compact, whose unit is 50 ms), as after a failover to a
// replica whose clock lags.
func TestZZReleaseAfterResetWithKeyClockAhead(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	for _, c := range []struct {
		text    string
		compact bool
		back    time.Duration
	}{
		{"300/1h", false, 5 * time.Second},      // bounded: a bucket is 36 s
		{"5/15m", true, 100 * time.Millisecond}, // compact: a unit is 50 ms
		{"2/1s,300/1h", false, 5 * time.Second}, // mixed (decide.lua): its bounded rate
	} {
		name := c.text
		if c.compact {
			name += "/compact"
		}
		t.Run(name, func(t *testing.T) {
			// Mid-bucket for the 36 s buckets (1_700_000_010 s is 10 s into one), off a unit's edge.
			clock := storetest.NewManualClock(time.Unix(1_700_000_010, int64(time.Millisecond)+1000))
			s := redisstore.New(newClient(t, standalone), roomy, redisstore.WithPrefix(freshPrefix(t)),
				redisstore.WithCompact(c.compact), redisstore.WithClock(clock.Now))
			p := mustParse(c.text)
			q := core.Query{Policy: p, Scope: "login", Key: "alice"}
			n := p.Rates()[len(p.Rates())-1].Count
			first, err := s.Decide(ctx, q)
			if err != nil || !first.Allowed {
				t.Fatalf("first: %+v %v", first, err)
			}
			// The clock steps back (the key's clock stays at its newest grant), and the
			// key is reset: the fence is the reset's clock reading, behind the first grant.
			clock.Advance(-c.back)
			if err := s.Reset(ctx, q); err != nil {
				t.Fatal(err)
			}
			// Time goes on; the key fills up again after the reset.
			clock.Advance(c.back)
			admitted := 0
			for i := 0; admitted < n && i < 4*n; i++ {
				clock.Advance(time.Millisecond)
				if i > 0 && c.text == "2/1s,300/1h" {
					clock.Advance(600 * time.Millisecond)
				}
				d, err := s.Decide(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != n {
				t.Fatalf("%d admitted after the reset, want %d", admitted, n)
			}
			// The first grant was forgotten by the reset: giving it back must change nothing.
			if err := s.Release(ctx, q, first.Grant); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Millisecond)
			if c.text == "2/1s,300/1h" {
				clock.Advance(600 * time.Millisecond)
			}
			if d, _ := s.Decide(ctx, q); d.Allowed {
				t.Fatalf("%v: %d grants after the reset, then one more admitted within the window: giving back a grant the reset forgot (recorded at %d, after the fence because the key's clock was ahead of the reset's) took one made after the reset (%+v)", p, n, first.Grant, d)
			}
		})
	}
}
