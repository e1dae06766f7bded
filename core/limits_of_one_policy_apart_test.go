package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// limitsInOrder counts the requests of in that pass every limit of ls in turn, as
// stacked middleware does, settling each admitted one with status; n requests.
func limitsInOrder(ls []adapter.Limiter, in adapter.Input, status, n int) int {
	got := 0
	for range n {
		var vs []adapter.Verdict
		ok := true
		for _, l := range ls {
			v := l.Check(context.Background(), in, nil)
			if ok = v.Allowed; !ok {
				break
			}
			vs = append(vs, v)
		}
		for i, v := range vs {
			ls[i].Settle(context.Background(), v, status)
		}
		if ok {
			got++
		}
	}
	return got
}

// Limits registered at two places with one policy text count apart in one memory store,
// also on one route: an app-wide 2/1m and a route's 2/1m each admit a client twice (one
// bucket for both would refuse the second request), and giving back the route limit's
// grants (WithCountWhen) frees its own entry, never the app-wide one's. In memory the
// limit's ident reaches the store only as its policy's salt: a Release that hashed its
// key without it would miss the entry Decide recorded in.
func TestLimitsOfOnePolicyCountApartOnOneRoute(t *testing.T) {
	store := core.WithStore(core.NewMemoryStore(nil))
	in := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1"}
	appWide := adapter.Must(2, time.Minute, store)
	route := adapter.Must(2, time.Minute, store)
	if got := limitsInOrder([]adapter.Limiter{appWide, route}, in, 200, 3); got != 2 {
		t.Fatalf("%d of 3 requests passed both 2/1m limits, want 2: they share a bucket", got)
	}

	released := adapter.Must(2, time.Minute, store, core.WithCountWhen(core.Failed))
	other := adapter.Must(5, time.Minute, store)
	in.Peer = "192.0.2.2:1"
	// 200 does not count: the released limit gives every grant back and admits all four.
	if got := limitsInOrder([]adapter.Limiter{released}, in, 200, 4); got != 4 {
		t.Fatalf("%d of 4 given-back requests passed 2/1m, want 4: Release missed Decide's entry", got)
	}
	if got := limitsInOrder([]adapter.Limiter{released}, in, 500, 3); got != 2 {
		t.Fatalf("%d of 3 counted requests passed 2/1m, want 2", got)
	}
	if got := limitsInOrder([]adapter.Limiter{other}, in, 200, 6); got != 5 {
		t.Fatalf("%d of 6 requests passed another limit's 5/1m, want 5", got)
	}
}

// A tier whose policy text equals its limit's own keeps a bucket apart from the limit's,
// with an ident and without (WithScope): a request of the tier and one without a tier
// each have the policy's whole count.
func TestTierOfTheLimitsOwnPolicyCountsApart(t *testing.T) {
	for _, opts := range [][]core.Option{nil, {core.WithScope("own-policy-tier")}} {
		store := core.WithStore(core.NewMemoryStore(nil))
		l := adapter.Must(2, time.Minute, append(opts, store, core.WithTiers(byPlan, map[string]string{"gold": "2/1m"}))...)
		gold := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1", Request: req("X-Plan", "gold")}
		plain := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1", Request: req()}
		if got := admitted([]adapter.Limiter{l}, gold, 3); got != 2 {
			t.Fatalf("scoped %v: tier gold admitted %d of 3, want 2", opts != nil, got)
		}
		if got := admitted([]adapter.Limiter{l}, plain, 3); got != 2 {
			t.Fatalf("scoped %v: the limit's own policy admitted %d of 3 after tier gold's 2, want 2: they share a bucket", opts != nil, got)
		}
	}
}

// A quota reaches a tier whose policy text equals its limit's own apart from the limit's
// bucket: Peek answers from the tier the client spent, not from the limit's fresh bucket
// of the same text, and Reset frees both.
func TestQuotaReachesATierOfTheLimitsOwnPolicy(t *testing.T) {
	q := new(core.Quota)
	l := adapter.Must(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("own-policy-quota"), core.WithQuota(q),
		core.WithTiers(byPlan, map[string]string{"gold": "3/1m"}))
	gold := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1", Request: req("X-Plan", "gold")}
	plain := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1", Request: req()}
	admitted([]adapter.Limiter{l}, gold, 3)
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("Peek after gold's 3 of 3: %+v, want gold's spent bucket", d)
	}
	if got := admitted([]adapter.Limiter{l}, plain, 1); got != 1 {
		t.Fatal("the limit's own 3/1m refused its first request after gold's 3: they share a bucket")
	}
	if err := q.Reset(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if got := admitted([]adapter.Limiter{l}, gold, 4); got != 3 {
		t.Errorf("gold after Reset admitted %d of 4, want 3", got)
	}
	if got := admitted([]adapter.Limiter{l}, plain, 4); got != 3 {
		t.Errorf("own policy after Reset admitted %d of 4, want 3", got)
	}
}

// A policy an application made (ParsePolicy) decided directly in the store that a limit
// of the same text uses, under the limit's route and key, touches none of the limit's
// buckets, nor does the limit touch its bucket.
func TestApplicationPolicyStaysApartFromALimitsBuckets(t *testing.T) {
	m := core.NewMemoryStore(nil)
	l := adapter.Must(2, time.Minute, core.WithStore(m))
	p, err := core.ParsePolicy("2/1m")
	if err != nil {
		t.Fatal(err)
	}
	q := core.Query{Policy: p, Scope: "GET /a", Key: "192.0.2.1"}
	for i := range 2 {
		if d, err := m.Decide(context.Background(), q); err != nil || !d.Allowed {
			t.Fatalf("application decision %d: %+v %v", i+1, d, err)
		}
	}
	in := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1"}
	if got := admitted([]adapter.Limiter{l}, in, 3); got != 2 {
		t.Fatalf("the limit admitted %d of 3 after the application's 2 decisions, want 2", got)
	}
	if d, err := m.Decide(context.Background(), q); err != nil || d.Allowed {
		t.Fatalf("third application decision: %+v %v, want refused", d, err)
	}
}

// A limit registered again at its site (a router rebuilt) shares its buckets and its tiers'
// with the first registration, and its tiers of one policy text stay apart from each
// other: the salts come from the site, not from the limiter value.
func TestRebuiltLimitSharesItsTiersBuckets(t *testing.T) {
	store := core.WithStore(core.NewMemoryStore(nil))
	var ls []adapter.Limiter
	for range 2 {
		ls = append(ls, adapter.Must(2, time.Minute, store, core.WithTiers(byPlan, map[string]string{"gold": "2/1m", "silver": "2/1m"})))
	}
	for _, plan := range []string{"gold", "silver", ""} {
		in := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1", Request: req("X-Plan", plan)}
		if got := admitted(ls[:1], in, 1) + admitted(ls[1:], in, 2); got != 2 {
			t.Errorf("tier %q: %d of 3 admitted across the two registrations, want 2", plan, got)
		}
	}
}

// Limits of one policy text on one store stay exact under concurrent decisions and
// registrations: goroutines that each register the limit at one site share its bucket
// and together admit its count, while another site's limit of that text, decided at the
// same time on the same route and key, admits its own count.
func TestLimitsOfOnePolicyStayExactConcurrently(t *testing.T) {
	m := core.NewMemoryStore(nil)
	in := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1"}
	const count, workers, each = 40, 4, 25
	var mu sync.Mutex
	var ours, theirs int
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := adapter.Must(count, time.Minute, core.WithStore(m)) // one site for every worker
			n := admitted([]adapter.Limiter{l}, in, each)
			mu.Lock()
			ours += n
			mu.Unlock()
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := adapter.Must(count, time.Minute, core.WithStore(m)) // a second site
			n := admitted([]adapter.Limiter{l}, in, each)
			mu.Lock()
			theirs += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if ours != count || theirs != count {
		t.Fatalf("admitted %d and %d of %d requests each, want %d each", ours, theirs, workers*each, count)
	}
}

// One limit on two routes counts each route apart in memory, where its ident is its
// policy's salt rather than part of the scope: the route alone still names the bucket.
func TestOneLimitOnTwoRoutesCountsEachApart(t *testing.T) {
	l := adapter.Must(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)))
	for _, route := range []string{"GET /a", "GET /b"} {
		in := adapter.Input{Route: route, Peer: "192.0.2.1:1"}
		if got := admitted([]adapter.Limiter{l}, in, 3); got != 2 {
			t.Errorf("%s: %d of 3 admitted, want 2", route, got)
		}
	}
}
