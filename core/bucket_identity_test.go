package core_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// scopeSpy is a store that remembers the scope of the last query, the bucket's name.
type scopeSpy struct {
	mu    sync.Mutex
	scope string
	core.Store
}

func (s *scopeSpy) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	s.mu.Lock()
	s.scope = q.Scope
	s.mu.Unlock()
	return s.Store.Decide(ctx, q)
}

// scopeOf returns the scope that l's bucket for route has in spy.
func scopeOf(t *testing.T, spy *scopeSpy, l adapter.Limiter, route string) string {
	t.Helper()
	l.Check(context.Background(), adapter.Input{Route: route, Peer: "192.0.2.1:1"}, nil)
	spy.mu.Lock()
	defer spy.mu.Unlock()
	return spy.scope
}

// siteA and siteB register a limit of policy from two places, as two routes of an
// application do.
func siteA(t *testing.T, policy string, opts ...core.Option) adapter.Limiter {
	l, err := adapter.Parse(policy, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func siteB(t *testing.T, policy string, opts ...core.Option) adapter.Limiter {
	l, err := adapter.Parse(policy, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A limit's buckets are named by where the code registers it, never by which limit of its
// policy registered first: under 7/13m site A registers first, under 7/17m second, and its
// scope for a route is the same, as it is in every instance of a build whatever the order
// of registration. Two sites count apart; the same site registering again (a router
// rebuilt) shares its buckets; WithScope names them.
func TestBucketsAreNamedByTheSiteNotTheOrder(t *testing.T) {
	spy := &scopeSpy{Store: core.NewMemoryStore(nil)}
	store := core.WithStore(spy)
	// One loop registers them all, so that only siteA and siteB tell the stacks apart.
	var scopes []string
	var again adapter.Limiter
	for _, r := range []struct {
		site   func(*testing.T, string, ...core.Option) adapter.Limiter
		policy string
	}{{siteA, "7/13m"}, {siteB, "7/17m"}, {siteA, "7/17m"}, {siteB, "7/13m"}, {siteA, "7/13m"}} {
		again = r.site(t, r.policy, store)
		scopes = append(scopes, scopeOf(t, spy, again, "/a"))
	}
	a1, a2, b := scopes[0], scopes[2], scopes[3]
	if a1 != a2 {
		t.Errorf("site A's scope for /a is %q registered first of its policy, %q registered second", a1, a2)
	}
	if a1 == b {
		t.Errorf("sites A and B share the scope %q for /a", a1)
	}
	if scopes[4] != a1 {
		t.Errorf("site A registering again: scope %q, first %q", scopes[4], a1)
	}
	if s := scopeOf(t, spy, again, "/b"); s == a1 {
		t.Errorf("one limit's routes /a and /b share the scope %q", s)
	}
	if s := scopeOf(t, spy, siteB(t, "7/13m", store, core.WithScope("login")), "/a"); s != "login" {
		t.Errorf("WithScope(\"login\"): scope %q", s)
	}
}

// An app-wide limit sees every route of the application, each with a bucket of its own
// (the route, and the limit's site as its policy's salt): in memory nothing is joined per
// route, so however many routes alternate, deciding allocates nothing per request.
func TestAppWideLimitNamesEveryRouteWithoutAllocating(t *testing.T) {
	l := adapter.Must(1_000_000, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithHeaders(core.HeadersOff))
	routes := make([]string, 300)
	for i := range routes {
		routes[i] = fmt.Sprintf("GET /r%d/{id}", i)
	}
	ctx := context.Background()
	in := adapter.Input{Peer: "192.0.2.1:1"}
	for _, r := range routes {
		in.Route = r
		l.Check(ctx, in, nil)
	}
	i := 0
	least := math.Inf(1)
	for range 5 { // the least of a few: other tests' goroutines can only add to a count
		least = min(least, testing.AllocsPerRun(len(routes), func() {
			in.Route = routes[i%len(routes)]
			i++
			if v := l.Check(ctx, in, nil); !v.Allowed {
				t.Fatalf("%s refused", in.Route)
			}
		}))
	}
	if least != 0 {
		t.Errorf("%v allocations per request across %d routes, want none", least, len(routes))
	}
}
