package core_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Limits registered from one line in a loop (routes read from configuration), with one
// Quota and one scope, are all reached: each replaced the one before in the Quota, and
// Reset forgot the client in the last route's limit only.
func TestQuotaResetReachesEveryLimitRegisteredInALoop(t *testing.T) {
	q := new(core.Quota)
	store := core.WithStore(core.NewMemoryStore(nil))
	var routes []adapter.Limiter
	for _, policy := range []string{"2/15m", "3/15m"} {
		l, err := adapter.Parse(policy, store, core.WithScope("login"), core.WithQuota(q))
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, l)
	}
	in := adapter.Input{Route: "POST /login", Peer: "192.0.2.9:1"}
	for i, l := range routes {
		if got := admitted([]adapter.Limiter{l}, in, i+3); got != i+2 {
			t.Fatalf("%s: %d of %d admitted", l.Policy(), got, i+3)
		}
	}
	if err := q.Reset(context.Background(), "192.0.2.9"); err != nil {
		t.Fatal(err)
	}
	for _, l := range routes {
		if v := l.Check(context.Background(), in, nil); !v.Allowed {
			t.Errorf("%s after Quota.Reset: refused; the reset missed a limit registered in the loop", l.Policy())
		}
	}
}

// A router rebuilt again and again (configuration reloads), its limits registered from
// the same lines each time, leaves its Quota holding what is in use, not every router
// built: the old routers' limits drop out once collected.
func TestQuotaDoesNotGrowWithARebuiltRouter(t *testing.T) {
	q := new(core.Quota)
	store := core.WithStore(core.NewMemoryStore(nil))
	var router []adapter.Limiter
	for reload := range 100 {
		if reload == 99 {
			runtime.GC() // frees every router built but the one in use
		}
		router = nil
		for _, n := range []int{2, 3, 4} { // a reload may change the policies
			router = append(router, adapter.Must(n+reload%7, time.Minute, store, core.WithScope("login"), core.WithQuota(q)))
		}
	}
	// Registering drops what was freed: what is left is the router built before the
	// collection, in use then, and the one built after.
	if n := core.QuotaHeld(q); n > 2*len(router) {
		t.Errorf("after 100 rebuilds of a router of %d limits, the Quota holds %d", len(router), n)
	}
	runtime.GC()
	if n := core.QuotaLimits(q); n != len(router) {
		t.Errorf("the Quota reaches %d limits; the router in use has %d", n, len(router))
	}
	in := adapter.Input{Route: "POST /login", Peer: "192.0.2.1:1"}
	admitted(router[:1], in, 1)
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil || d.Rate != router[0].Policy().Rates()[0] || d.Remaining != d.Rate.Count-1 {
		t.Errorf("Peek: %+v %v; want the router in use's %s with one spent", d, err, router[0].Policy())
	}
}

// A limit registered only for its Quota (in a process that resets clients in a shared
// Redis and serves no requests) stays reached though nothing else holds it.
func TestQuotaKeepsTheLastLimitRegisteredFromAPlace(t *testing.T) {
	q := new(core.Quota)
	store := core.NewMemoryStore(nil)
	adapter.Must(1, time.Minute, core.WithStore(store), core.WithScope("login"), core.WithQuota(q))
	runtime.GC()
	p, err := core.ParsePolicy("1/1m")
	if err != nil {
		t.Fatal(err)
	}
	query := core.Query{Policy: p, Scope: "login", Key: "alice"}
	store.Decide(context.Background(), query)
	if err := q.Reset(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if d, _ := store.Decide(context.Background(), query); !d.Allowed {
		t.Errorf("after Quota.Reset: %+v; the reset did not reach the limit", d)
	}
}

// Peek has no request to pick a tier by: it answers from the tier whose bucket holds the
// client's grants, and from the limit's own policy for a client with none. It answered
// from the own policy only: a client that had spent its paid tier's quota was reported
// free to send.
func TestQuotaPeekAnswersFromTheTierInUse(t *testing.T) {
	q := new(core.Quota)
	l := adapter.Must(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("search"), core.WithQuota(q),
		core.WithTiers(byPlan, map[string]string{"paid": "5/1m", "staff": "unlimited"}))
	in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req("X-Plan", "paid")}
	for _, c := range []struct {
		send, want, left int
	}{
		{0, 2, 2}, // nothing sent: the limit's own 2/1m
		{2, 5, 3}, // the paid 5/1m, not the own policy's fresh bucket, which has less left
		{4, 5, 0}, // the paid tier spent: the next request is refused
	} {
		admitted([]adapter.Limiter{l}, in, c.send)
		d, err := q.Peek(context.Background(), "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if d.Rate.Count != c.want || d.Remaining != c.left || d.Allowed != (c.left > 0) {
			t.Errorf("Peek after %d more paid requests: Allowed=%v %d left of %v; want %d left of %d/1m",
				c.send, d.Allowed, d.Remaining, d.Rate, c.left, c.want)
		}
	}
}

// Two tiers of one policy text keep buckets apart, in the memory store as in any other,
// and Reset forgets the client in both: asked once per bucket, it took the second tier's
// bucket for the first's and left it full.
func TestQuotaResetReachesTiersOfOnePolicy(t *testing.T) {
	q := new(core.Quota)
	l := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("search"), core.WithQuota(q),
		core.WithTiers(byPlan, map[string]string{"gold": "2/1m", "silver": "2/1m"}))
	for _, plan := range []string{"gold", "silver"} {
		in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req("X-Plan", plan)}
		if got := admitted([]adapter.Limiter{l}, in, 3); got != 2 {
			t.Fatalf("%s: %d of 3 admitted, want 2: the tiers share a bucket", plan, got)
		}
	}
	if err := q.Reset(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	for _, plan := range []string{"gold", "silver"} {
		in := adapter.Input{Route: "GET /search", Peer: "192.0.2.1:1", Request: req("X-Plan", plan)}
		if v := l.Check(context.Background(), in, nil); !v.Allowed {
			t.Errorf("%s after Quota.Reset: refused; the reset missed its bucket", plan)
		}
	}
}

// A limit keyed by a function counts a request without a key by the client's address;
// Peek with the address finds that bucket, as Reset does. It reported a fresh quota while
// the client was refused.
func TestQuotaPeekFindsTheAddressFallback(t *testing.T) {
	q := new(core.Quota)
	l := adapter.Must(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("api"), core.WithQuota(q),
		core.WithKey(core.KeyByHeader("X-API-Token")))
	in := adapter.Input{Route: "GET /api", Peer: "192.0.2.7:1", Request: req()}
	if got := admitted([]adapter.Limiter{l}, in, 3); got != 2 {
		t.Fatalf("%d of 3 requests without a token admitted, want 2", got)
	}
	d, err := q.Peek(context.Background(), "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 {
		t.Errorf("Peek(192.0.2.7): Allowed=%v, %d left; the client is refused", d.Allowed, d.Remaining)
	}
}

// countingStore counts the decisions and resets asked of a MemoryStore.
type countingStore struct {
	*core.MemoryStore
	decides, resets atomic.Int64
}

func (s *countingStore) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	s.decides.Add(1)
	return s.MemoryStore.Decide(ctx, q)
}

func (s *countingStore) Reset(ctx context.Context, q core.Query) error {
	s.resets.Add(1)
	return s.MemoryStore.Reset(ctx, q)
}

// A client the memory store decided in its overflow bucket (the store at MaxKeys) has no
// bucket of its own to reset: Quota.Reset says so, rather than report a reset that left
// the client refused; once the overflow bucket holds nothing, there is nothing to reset.
func TestQuotaResetInTheOverflowBucketFails(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, MaxKeys: 1, SweepInterval: time.Hour})
	quota := new(core.Quota)
	l := adapter.Must(2, 15*time.Minute, core.WithStore(store), core.WithScope("overflow"), core.WithQuota(quota))
	l.Check(ctx, adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}, nil) // the store is full from here
	alice := adapter.Input{Route: "/login", Peer: "192.0.2.2:1"}
	for range 3 {
		l.Check(ctx, alice, nil)
	}
	if l.Check(ctx, alice, nil).Allowed {
		t.Fatal("alice not refused in the overflow bucket")
	}
	if err := quota.Reset(ctx, "192.0.2.2"); err == nil || !strings.Contains(err.Error(), "MaxKeys 1") {
		t.Errorf("Reset of a client in the overflow bucket: %v, want an error naming the key cap", err)
	}
	clock.Advance(16 * time.Minute)
	if err := quota.Reset(ctx, "192.0.2.2"); err != nil {
		t.Errorf("Reset once the overflow bucket holds nothing: %v", err)
	}
}

// Quota finds a client by any address the limit keys alike: an IPv6 address in the /64 its
// key names, an IPv4-mapped address as IPv4, also in a key function's address fallback.
func TestQuotaFindsAnAddressAsTheLimitKeysIt(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ peer, asked string }{
		{"[2001:db8:1:2::5]:1", "2001:db8:1:2::9"},
		{"[2001:db8:1:2::5]:1", "2001:db8:1:2::/64"},
		{"192.0.2.7:1", "::ffff:192.0.2.7"},
	} {
		for _, keyed := range []bool{false, true} {
			quota := new(core.Quota)
			opts := []core.Option{core.WithStore(core.NewMemoryStore(nil)), core.WithScope("find"), core.WithQuota(quota)}
			if keyed { // a key function that finds no user: the address fallback
				opts = append(opts, core.WithKey(func(core.Request) (string, error) { return "", nil }))
			}
			l := adapter.Must(1, time.Hour, opts...)
			in := adapter.Input{Route: "/r", Peer: c.peer, Request: fakeRequest{}}
			l.Check(ctx, in, nil)
			if l.Check(ctx, in, nil).Allowed {
				t.Fatalf("%s: not refused", c.peer)
			}
			if err := quota.Reset(ctx, c.asked); err != nil {
				t.Fatal(err)
			}
			if !l.Check(ctx, in, nil).Allowed {
				t.Errorf("%s (key function %v): still refused after Reset(%q)", c.peer, keyed, c.asked)
			}
		}
	}
}

// brokenResetter is a memory store whose resets fail, as a Redis mid-outage's do.
type brokenResetter struct{ *core.MemoryStore }

func (brokenResetter) Reset(context.Context, core.Query) error {
	return errors.New("connection refused")
}

// TestQuotaResetGoesOnPastAFailedBucket: a Quota.Reset whose first limit's store fails to
// reset still resets the other limits' buckets, and its error names the one that failed;
// it used to stop at the first error, leaving the client refused by the rest.
func TestQuotaResetGoesOnPastAFailedBucket(t *testing.T) {
	q := new(core.Quota)
	broken := adapter.Must(1, time.Hour, core.WithStore(brokenResetter{core.NewMemoryStore(nil)}), core.WithScope("login"), core.WithQuota(q))
	working := adapter.Must(2, time.Hour, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("login"), core.WithQuota(q))
	in := adapter.Input{Route: "POST /login", Peer: "192.0.2.9:1"}
	for _, l := range []adapter.Limiter{broken, working} {
		if got := admitted([]adapter.Limiter{l}, in, 3); got != l.Policy().Rates()[0].Count {
			t.Fatalf("%s: %d of 3 admitted", l.Policy(), got)
		}
	}
	err := q.Reset(context.Background(), "192.0.2.9")
	if err == nil || !strings.Contains(err.Error(), "1/1h") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Reset: %v, want the failed bucket of 1/1h named", err)
	}
	if v := working.Check(context.Background(), in, nil); !v.Allowed {
		t.Error("2/1h after a Quota.Reset whose 1/1h bucket failed: refused; the reset stopped at the first error")
	}
}
