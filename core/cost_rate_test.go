package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestCostAboveTheLimitNamesTheRateItExceeds: a request refused for a cost above the
// limit carries, in its Decision (what a deny handler and observers read), the rate the
// cost exceeds. It carried the policy's first rate, whatever its count: with an hourly cap
// and a tighter per-minute rate, a cost of 200 read as refused by 1000/1h, which it fits,
// and docs/grpc.md's deny handler told the client "1000/1h per client".
func TestCostAboveTheLimitNamesTheRateItExceeds(t *testing.T) {
	var seen core.Event
	l := adapter.Must(1000, time.Hour, core.WithRate(100, time.Minute), core.WithStore(core.NewMemoryStore(nil)),
		core.WithCost(func(core.Request) int { return 200 }), core.WithErrorHook(func(context.Context, error) {}),
		core.WithObserver(func(e core.Event) { seen = e }))
	v := l.Check(context.Background(), adapter.Input{Route: "/export", Peer: "192.0.2.1:1", Request: fakeRequest{}}, nil)
	want := core.Rate{Count: 100, Period: time.Minute}
	if v.Allowed || v.Status != 413 || v.Decision.Rate != want {
		t.Errorf("a cost of 200 under 1000/1h,100/1m: allowed %v, status %d, rate %v; want refused with 413 by %v", v.Allowed, v.Status, v.Decision.Rate, want)
	}
	if seen.Outcome != core.Errored || seen.Decision.Rate != want {
		t.Errorf("the observer saw %v with rate %v, want %v with %v", seen.Outcome, seen.Decision.Rate, core.Errored, want)
	}
}
