package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

func byPlan(r core.Request) string { return r.Header("X-Plan") }

// admitted counts how many of n requests every limit in ls admits, each request passing
// the limits in turn as stacked middleware does.
func admitted(ls []adapter.Limiter, in adapter.Input, n int) int {
	got := 0
	for range n {
		ok := true
		for _, l := range ls {
			if ok = l.Check(context.Background(), in, nil).Allowed; !ok {
				break
			}
		}
		if ok {
			got++
		}
	}
	return got
}

// A tier's buckets are its own: not an app-wide limit's of the same policy (a request
// would count twice there), nor another tier's of the same policy in the same limit.
func TestTierBucketsAreTheirOwn(t *testing.T) {
	store := core.NewMemoryStore(nil)
	appWide := adapter.Must(37, time.Minute, core.WithStore(store))
	route := adapter.Must(29, 13*time.Minute, core.WithStore(store),
		core.WithTiers(byPlan, map[string]string{"pro": "37/1m", "team": "37/1m"}))
	pro := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req("X-Plan", "pro")}
	if got := admitted([]adapter.Limiter{appWide, route}, pro, 40); got != 37 {
		t.Fatalf("pro client through an app-wide 37/1m and a route whose pro tier is 37/1m: %d of 40 admitted, want 37", got)
	}
	team := pro
	team.Request = req("X-Plan", "team")
	if got := admitted([]adapter.Limiter{route}, team, 40); got != 37 {
		t.Fatalf("the same client on the route's team tier, also 37/1m: %d of 40 admitted, want 37 (a bucket of its own)", got)
	}
}

// Quota.Reset forgets a key in the tiers' buckets too, and, with a key function, the
// buckets of requests keyed by their address.
func TestQuotaResetReachesTiersAndAddressFallback(t *testing.T) {
	q := new(core.Quota)
	l := adapter.Must(31, 17*time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("login"), core.WithQuota(q),
		core.WithKey(core.KeyByHeader("X-User")), core.WithTiers(byPlan, map[string]string{"pro": "2/1m"}))
	for _, c := range []struct {
		name, key string
		in        adapter.Input
	}{
		{"tier", "alice", adapter.Input{Route: "POST /login", Peer: "192.0.2.1:1", Request: req("X-Plan", "pro", "X-User", "alice")}},
		{"address", "192.0.2.9", adapter.Input{Route: "POST /login", Peer: "192.0.2.9:1", Request: req("X-Plan", "pro")}},
	} {
		if got := admitted([]adapter.Limiter{l}, c.in, 3); got != 2 {
			t.Fatalf("%s: %d of 3 admitted by a 2/1m tier, want 2", c.name, got)
		}
		if err := q.Reset(context.Background(), c.key); err != nil {
			t.Fatal(err)
		}
		if v := l.Check(context.Background(), c.in, nil); !v.Allowed {
			t.Fatalf("%s: after Quota.Reset(%q) still refused (%v of %v)", c.name, c.key, v.Decision.RetryAfter, v.Decision.Rate)
		}
	}
}
