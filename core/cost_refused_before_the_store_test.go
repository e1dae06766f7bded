package core_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// askedStore fails every decision, like a Redis that is gone, and counts how often it was
// asked: a cost no rate admits must not reach it, in any fail mode.
type askedStore struct{ asked atomic.Int64 }

func (s *askedStore) Decide(context.Context, core.Query) (core.Decision, error) {
	s.asked.Add(1)
	return core.Decision{}, errors.New("connection refused")
}

// Every way a limit can be configured around a cost decides the refusal itself: the
// tier's own policy (a cost that fits one tier and not another), the narrowest of extra
// rates, dry run, Penalty, and each fail mode with a store that fails. The refusal is a
// 413 without Retry-After, the observer hears Errored with the rate the cost exceeds, and
// only RateLimit-Policy is set.
func TestCostAboveTheLimitIsRefusedBeforeTheStoreInEveryMode(t *testing.T) {
	cost := func(core.Request) int { return 5 }
	quiet := core.WithErrorHook(func(context.Context, error) {})
	for _, c := range []struct {
		name     string
		opts     []core.Option
		plan     string
		want     core.Rate
		allowed  bool
		reaches  bool // the cost fits: the (failing) store is asked
		failMode core.FailMode
	}{
		{name: "tier too small", plan: "free", want: core.Rate{Count: 2, Period: time.Minute},
			opts: []core.Option{core.WithTiers(byPlan, map[string]string{"free": "2/1m"})}},
		{name: "tier that fits", plan: "pro", reaches: true, allowed: true,
			opts: []core.Option{core.WithTiers(byPlan, map[string]string{"free": "2/1m"})}},
		{name: "narrowest extra rate", want: core.Rate{Count: 3, Period: time.Second},
			opts: []core.Option{core.WithRate(3, time.Second)}},
		{name: "dry run", allowed: true, want: core.Rate{Count: 4, Period: time.Minute},
			opts: []core.Option{core.WithRate(4, time.Minute), core.WithDryRun()}},
		{name: "penalty", want: core.Rate{Count: 4, Period: time.Minute},
			opts: []core.Option{core.WithRate(4, time.Minute), core.WithPenalty()}},
		{name: "fail local", failMode: core.FailLocal, want: core.Rate{Count: 4, Period: time.Minute},
			opts: []core.Option{core.WithRate(4, time.Minute)}},
		{name: "fail closed", failMode: core.FailClosed, want: core.Rate{Count: 4, Period: time.Minute},
			opts: []core.Option{core.WithRate(4, time.Minute)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &askedStore{}
			var events []core.Event
			opts := append([]core.Option{core.WithStore(store), core.WithCost(cost), quiet,
				core.WithFailMode(c.failMode), core.WithObserver(func(e core.Event) { events = append(events, e) })}, c.opts...)
			l := adapter.Must(10, time.Minute, opts...)
			r := fakeRequest{h: http.Header{"X-Plan": {c.plan}}}
			in := adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: r}
			h := hook.HeaderMap{}
			v := l.Check(context.Background(), in, h)
			if v.Allowed != c.allowed {
				t.Fatalf("cost 5: allowed %v, want %v (%+v)", v.Allowed, c.allowed, v)
			}
			if n := store.asked.Load(); c.reaches != (n > 0) {
				t.Fatalf("the store was asked %d times, want it asked: %v", n, c.reaches)
			}
			if c.reaches {
				return
			}
			if v.Status != http.StatusRequestEntityTooLarge || !errors.Is(v.Err, core.ErrCostTooHigh) {
				t.Fatalf("cost 5: status %d, err %v; want 413 and ErrCostTooHigh", v.Status, v.Err)
			}
			if _, ok := h[hook.HeaderRetryAfter]; ok {
				t.Errorf("Retry-After %q on a refusal waiting cannot end", h[hook.HeaderRetryAfter])
			}
			if _, ok := h[hook.HeaderRateLimit]; ok {
				t.Errorf("RateLimit %q on a refusal no store decided", h[hook.HeaderRateLimit])
			}
			if len(h[hook.HeaderRateLimitPolicy]) != 1 {
				t.Errorf("RateLimit-Policy %q, want one line", h[hook.HeaderRateLimitPolicy])
			}
			if len(events) != 1 || events[0].Outcome != core.Errored || events[0].Decision.Rate != c.want ||
				events[0].DryRun != (c.allowed) {
				t.Fatalf("events %+v, want one Errored at rate %v", events, c.want)
			}
		})
	}
}
