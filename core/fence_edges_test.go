package core_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// A reset's fence stays until it is twice the longest period old, also for the longest
// period a rate may have (1<<62 ns), where twice the period does not fit an int64: every
// fence was dropped at the first prune, and a release of a grant the reset forgot took
// away a grant made after the reset.
func TestFenceSurvivesPruneAtTheLongestPeriod(t *testing.T) {
	for _, period := range []time.Duration{1 << 61, core.MaxPeriodForTest} {
		t.Run(period.String(), func(t *testing.T) { fenceSurvivesPrune(t, period) })
	}
}

func fenceSurvivesPrune(t *testing.T, period time.Duration) {
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	p := mustPolicy(core.Rate{Count: 300, Period: period}) // bounded: grants found by bucket
	ctx := context.Background()
	q := core.Query{Policy: p, Scope: "s", Key: "alice"}
	clock.Advance(time.Second)
	first, err := s.Decide(ctx, q)
	if err != nil || !first.Allowed {
		t.Fatalf("first: %+v %v", first, err)
	}
	clock.Advance(time.Second)
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	// 300 grants after the reset.
	for i := range 300 {
		clock.Advance(time.Millisecond)
		if d, _ := s.Decide(ctx, q); !d.Allowed {
			t.Fatalf("grant %d after the reset refused: %+v", i, d)
		}
	}
	// Other keys' resets, enough for a prune of the fences (64), one second later.
	clock.Advance(time.Second)
	for i := range 70 {
		o := core.Query{Policy: p, Scope: "s", Key: fmt.Sprint("other-", i)}
		s.Decide(ctx, o)
		if err := s.Reset(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The request in flight across the reset gives its grant back (WithCountWhen).
	if err := s.Release(ctx, q, first.Grant); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Decide(ctx, q); d.Allowed {
		t.Fatalf("300 grants since the reset, within seconds, and one more admitted for 300 per %v: the reset's fence was pruned (fenceGone's 2*longest overflowed)", p.Rates()[0].Period)
	}
}

// A reset fences at the key's own clock, the newest time it recorded, where the store's
// clock has stepped back behind it (MemoryConfig.Now of a wall clock without a monotonic
// reading, stepped back by NTP): fenced at the store's reading, a grant in flight across
// the reset was given back out of the grants made after it. "Time never runs backwards
// for a key" (docs/algorithm.md).
func TestFenceAfterTheClockStepsBack(t *testing.T) {
	for _, c := range []struct {
		policy string
		step   time.Duration // between the grants after the reset
	}{
		{"300/1h", time.Millisecond}, // bounded: found by its bucket (36 s)
		{"5/15m", 0},                 // exact: found by its time (a coarse clock)
	} {
		t.Run(c.policy, func(t *testing.T) {
			clock, s, q, first := grantInFlight(t, c.policy)
			n := q.Policy.Rates()[0].Count
			ctx := context.Background()
			clock.Advance(-time.Millisecond) // the clock is stepped back 1 ms
			if err := s.Reset(ctx, q); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Millisecond)
			for i := range n {
				if d, _ := s.Decide(ctx, q); !d.Allowed {
					t.Fatalf("grant %d after the reset refused: %+v", i, d)
				}
				clock.Advance(c.step)
			}
			if err := s.Release(ctx, q, first.Grant); err != nil {
				t.Fatal(err)
			}
			if d, _ := s.Decide(ctx, q); d.Allowed {
				t.Fatalf("%s: %d grants since the reset within %v, then one more admitted: releasing the grant the reset forgot gave back a later one (fence %v older than the grant)",
					c.policy, n, time.Duration(n)*c.step, time.Millisecond)
			}
		})
	}
}

// A store clock that has run far from the store's first reading (the store counts
// nanoseconds from it in an int64): a key whose grants are all in the window is not idle,
// also within a period of MaxInt64 ns, where "the newest grant's end plus T" overflowed
// and a sweep dropped a bounded key, granting its quota again.
func TestSweepNearTheEndOfTheClockKeepsGrants(t *testing.T) {
	for _, policy := range []string{"5/1h", "300/1h"} {
		t.Run(policy, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			clock := storetest.NewManualClock(start)
			s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
			clock.Advance(time.Duration(math.MaxInt64 - int64(30*time.Minute)))
			p := mustParse(policy)
			n := p.Rates()[0].Count
			ctx := context.Background()
			q := core.Query{Policy: p, Key: "k"}
			for i := range n {
				if d, _ := s.Decide(ctx, q); !d.Allowed {
					t.Fatalf("grant %d refused: %+v", i, d)
				}
			}
			clock.Advance(time.Second)
			core.SweepNow(s)
			if d, _ := s.Decide(ctx, q); d.Allowed {
				t.Fatalf("%d grants 1 s ago, a sweep, and one more admitted for %s: the key was swept as idle", n, policy)
			}
		})
	}
}

// A second reset of a key at a store clock stepped back below the first reset's fence
// keeps the first fence: lowered, it let through a grant the first reset forgot, whose
// release gave back a grant made after both resets at the same time, one request more than
// the limit since the last reset.
func TestASecondResetNeverLowersTheFence(t *testing.T) {
	for _, policy := range []string{
		"300/1h", // bounded: found by its bucket
		"5/15m",  // exact: found by its time
	} {
		t.Run(policy, func(t *testing.T) {
			clock, s, q, first := grantInFlight(t, policy)
			n := q.Policy.Rates()[0].Count
			ctx := context.Background()
			if err := s.Reset(ctx, q); err != nil { // fence at first's time
				t.Fatal(err)
			}
			clock.Advance(-time.Second)             // the clock is stepped back
			if err := s.Reset(ctx, q); err != nil { // at a second earlier: the fence stays
				t.Fatal(err)
			}
			clock.Advance(time.Second) // and forward again, to first's time
			for i := range n {
				if d, _ := s.Decide(ctx, q); !d.Allowed {
					t.Fatalf("grant %d after the resets refused: %+v", i, d)
				}
			}
			if err := s.Release(ctx, q, first.Grant); err != nil {
				t.Fatal(err)
			}
			if d, _ := s.Decide(ctx, q); d.Allowed {
				t.Fatalf("%d grants since the last reset at one instant, then one more admitted: the release of a grant the first reset forgot gave back a later one (the second reset lowered the fence)", n)
			}
		})
	}
}

// grantInFlight returns a store of policy on a clock that stands still, and the query and
// the grant of a request still in flight on it, made 10 s in.
func grantInFlight(t *testing.T, policy string) (*storetest.ManualClock, *core.MemoryStore, core.Query, core.Decision) {
	t.Helper()
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	q := core.Query{Policy: mustParse(policy), Scope: "login", Key: "alice"}
	clock.Advance(10 * time.Second)
	first, err := s.Decide(context.Background(), q)
	if err != nil || !first.Allowed {
		t.Fatalf("first: %+v %v", first, err)
	}
	return clock, s, q, first
}
