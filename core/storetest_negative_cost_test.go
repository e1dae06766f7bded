package core_test

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// freeBelowZero is a store that counts a cost below 0 as free (a Lua script that adds
// the cost it is given, a store that defaults only the zero value to 1): core.Query says
// a cost below 1 counts as 1, and under such a store a cost function that returned -1
// turned the limit off.
type freeBelowZero struct{ *core.MemoryStore }

func (s freeBelowZero) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	if q.Cost < 0 {
		q.Mode = core.Peek
	}
	return s.MemoryStore.Decide(ctx, q)
}

// The conformance suite "every core.Store must pass" fails a store that admits requests
// of cost -1 without counting them: it used to decide no cost below 0, and passed it.
func TestConformanceSuiteFailsAStoreThatCountsNegativeCostsAsFree(t *testing.T) {
	if os.Getenv("REQLIMIT_SUITE_ON_BROKEN_STORE") == "1" {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			return storetest.Harness{
				Store:   freeBelowZero{core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})},
				Advance: func(d time.Duration) { clock.Advance(d) },
			}
		})
		return
	}
	// The store does break a limit: 3/1h admits every request of cost -1.
	s := freeBelowZero{core.NewMemoryStore(nil)}
	p, _ := core.NewPolicy(core.Rate{Count: 3, Period: time.Hour})
	for i := range 10 {
		d, err := s.Decide(context.Background(), core.Query{Policy: p, Key: "k", Cost: -1})
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	out, passed := rerun(t, "REQLIMIT_SUITE_ON_BROKEN_STORE=1", "-test.run", "^TestConformanceSuiteFailsAStoreThatCountsNegativeCostsAsFree$", "-test.count=1")
	if passed {
		t.Fatalf("storetest.Run passed a store that admitted 10 of 10 requests of cost -1 under 3/1h :\n%s", lastLines(out, 3))
	}
}

func lastLines(b []byte, n int) string {
	s := string(b)
	for i := len(s) - 2; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// costStore records the costs it is asked to decide.
type costStore struct {
	*core.MemoryStore
	costs []int
}

func (s *costStore) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	s.costs = append(s.costs, q.Cost)
	return s.MemoryStore.Decide(ctx, q)
}

// TestCostBelowOneReachesTheStoreAsOne: a cost function's value below 1 is given to the
// store as 1, so that no store, whatever it makes of a negative cost, is turned off by one.
func TestCostBelowOneReachesTheStoreAsOne(t *testing.T) {
	for _, c := range []int{0, -1, math.MinInt} {
		s := &costStore{MemoryStore: core.NewMemoryStore(nil)}
		l := adapter.Must(3, time.Hour, core.WithStore(s), core.WithCost(func(core.Request) int { return c }))
		admitted := 0
		for range 5 {
			if l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "192.0.2.1:1", Request: req()}, nil).Allowed {
				admitted++
			}
		}
		if admitted != 3 || s.costs[0] != 1 {
			t.Errorf("cost %d: %d of 5 admitted by 3/1h, the store was asked for costs %v; want 3, each of cost 1", c, admitted, s.costs)
		}
	}
}
