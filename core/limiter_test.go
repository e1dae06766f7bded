package core_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A bad limit panics at registration naming the adapter function, the value, and the
// application's line, found without core knowing its adapters by name.
func TestLimitPanicNamesValueAndSite(t *testing.T) {
	defer func() {
		msg := fmt.Sprint(recover())
		for _, want := range []string{"nethttp.Limit(0, 1m0s)", "limiter_test.go:", `register("GET /user/test"`, "count 0"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("panic %q lacks %q", msg, want)
			}
		}
	}()
	register := func(pattern string, h func(http.Handler) http.Handler) {}
	register("GET /user/test", nethttp.Limit(0, time.Minute))
	t.Fatal("no panic")
}

// downStore fails every decision, like a Redis that is gone.
type downStore struct{}

func (downStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("connection refused")
}

func TestFailModes(t *testing.T) {
	in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}
	var hooked []error
	hook := core.WithErrorHook(func(_ context.Context, err error) { hooked = append(hooked, err) })
	for _, c := range []struct {
		mode     core.FailMode
		status   int
		allowed  []bool
		wantCode int
	}{
		{core.FailOpen, 0, []bool{true, true, true, true}, 0},
		{core.FailClosed, 0, []bool{false, false, false, false}, 503},
		{core.FailClosed, 429, []bool{false, false, false, false}, 429},
		{core.FailLocal, 0, []bool{true, true, true, false}, 429}, // still 3 per minute, locally
	} {
		opts := []core.Option{core.WithStore(downStore{}), core.WithFailMode(c.mode), hook}
		if c.status != 0 {
			opts = append(opts, core.WithFailStatus(c.status))
		}
		l, err := adapter.New(3, time.Minute, opts...)
		if err != nil {
			t.Fatal(err)
		}
		hooked = nil
		for i, want := range c.allowed {
			v := l.Check(context.Background(), in, nil)
			if v.Allowed != want || v.Err == nil || (!v.Allowed && v.Status != c.wantCode) {
				t.Fatalf("%v request %d: %+v, want allow=%v status %d", c.mode, i+1, v, want, c.wantCode)
			}
		}
		if len(hooked) != len(c.allowed) || !strings.Contains(hooked[0].Error(), "connection refused") {
			t.Fatalf("%v: error hook saw %v", c.mode, hooked)
		}
	}
}

// A refusal the store failed to decide (FailClosed) tells the client only what is known:
// the policy and when to retry, no remaining count or reset it never read, and a body that
// matches the fail status (503 by default).
func TestFailClosedSendsNoMadeUpFields(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /r", nethttp.Limit(3, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed),
		core.WithErrorHook(func(context.Context, error) {}))(http.NotFoundHandler()))
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/r", nil)
	mux.ServeHTTP(w, r)
	h := w.Header()
	if w.Code != 503 || w.Body.String() != "Service Unavailable\n" {
		t.Errorf("status %d, body %q; want 503, \"Service Unavailable\\n\"", w.Code, w.Body.String())
	}
	if h.Get("Retry-After") != "1" || h.Get("RateLimit-Policy") != `"3/1m";q=3;w=60` || h.Values("RateLimit") != nil {
		t.Errorf("fields %v; want Retry-After 1 and RateLimit-Policy, no RateLimit", h)
	}
}

// ctxStore fails as a store across a network does when the request's context ends first:
// with the context's error.
type ctxStore struct{}

func (ctxStore) Decide(ctx context.Context, _ core.Query) (core.Decision, error) {
	<-ctx.Done()
	return core.Decision{}, fmt.Errorf("redis: %w", ctx.Err())
}

// A request whose context ends before the store answers is refused in every fail mode:
// admitted uncounted, any client could skip a limit on a remote store by hanging up. A
// hang-up (Canceled) is not a fault to report; a passed deadline (the store too slow for
// the request) is.
func TestRequestGoneIsRefusedInEveryFailMode(t *testing.T) {
	in := adapter.Input{Route: "/sms", Peer: "192.0.2.1:1"}
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		for _, c := range []struct {
			name     string
			ctx      func() (context.Context, context.CancelFunc)
			reported bool
		}{
			{"hung-up", func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			}, false},
			{"deadline", func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Millisecond)
			}, true},
		} {
			var hooked []error
			l := adapter.Must(3, time.Minute, core.WithStore(ctxStore{}), core.WithFailMode(mode),
				core.WithErrorHook(func(_ context.Context, err error) { hooked = append(hooked, err) }))
			ctx, cancel := c.ctx()
			v := l.Check(ctx, in, adapter.HeaderMap{})
			cancel()
			if v.Allowed || v.Status != 503 || v.Err == nil || !strings.Contains(v.Err.Error(), "request ended before the store decided") {
				t.Errorf("%v, %s: %+v, want refused with 503 and the reason", mode, c.name, v)
			}
			if (len(hooked) > 0) != c.reported {
				t.Errorf("%v, %s: error hook saw %v, want reported=%v", mode, c.name, hooked, c.reported)
			}
		}
	}
	// A dry run still never refuses.
	l := adapter.Must(3, time.Minute, core.WithStore(ctxStore{}), core.WithDryRun(), core.WithErrorHook(func(context.Context, error) {}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := l.Check(ctx, in, nil); !v.Allowed {
		t.Errorf("dry run: %+v, want let through", v)
	}
}

// lateContext is a request context whose deadline has passed while its timer has not yet
// fired: Err is still nil. A store given the deadline fails in that gap.
type lateContext struct{ context.Context }

func (lateContext) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// deadlineStore fails as a store across a network does when the request's deadline
// passes during the call.
type deadlineStore struct{}

func (deadlineStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, fmt.Errorf("redisstore: decide: %w", context.DeadlineExceeded)
}

// TestRequestPastItsDeadlineIsRefusedBeforeItsTimerFires: a request whose deadline passed
// during the store call is refused in every fail mode even while its context's Err is
// still nil: FailOpen admitted it uncounted, so a client choosing short deadlines (gRPC's
// grpc-timeout) got past a spent limit on Redis.
func TestRequestPastItsDeadlineIsRefusedBeforeItsTimerFires(t *testing.T) {
	in := adapter.Input{Route: "/sms", Peer: "192.0.2.1:1"}
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		l := adapter.Must(3, time.Minute, core.WithStore(deadlineStore{}), core.WithFailMode(mode),
			core.WithErrorHook(func(context.Context, error) {}))
		v := l.Check(lateContext{context.Background()}, in, adapter.HeaderMap{})
		if v.Allowed || v.Status != 503 || v.Err == nil || !strings.Contains(v.Err.Error(), "request ended before the store decided") {
			t.Errorf("%v: %+v, want refused with 503 and the reason", mode, v)
		}
	}
}

// A cost above the limit is refused whatever the fail mode (it could never fit, and
// admitting it uncounted would break the limit), with 413 rather than a 429 that invites a
// retry, and the error hook hears of it.
func TestCostAboveLimitIsRefused(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		hooked := 0
		l, err := adapter.New(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithFailMode(mode),
			core.WithCost(func(core.Request) int { return 5 }),
			core.WithErrorHook(func(context.Context, error) { hooked++ }))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			v := l.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: fakeRequest{}}, nil)
			if v.Allowed || v.Status != 413 || !errors.Is(v.Err, core.ErrCostTooHigh) {
				t.Fatalf("%v, request %d: %+v", mode, i, v)
			}
		}
		if hooked != 10 {
			t.Fatalf("%v: error hook called %d times, want 10", mode, hooked)
		}
	}
}

// A request whose cost no rate can ever admit is refused before the store is asked: across
// a network, a round trip that can only say no.
func TestCostAboveLimitNeverReachesTheStore(t *testing.T) {
	store, cost := &countingStore{MemoryStore: core.NewMemoryStore(nil)}, 5
	l := adapter.Must(2, time.Minute, core.WithStore(store),
		core.WithCost(func(core.Request) int { return cost }), core.WithErrorHook(func(context.Context, error) {}))
	in := adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: fakeRequest{}}
	for range 3 {
		if v := l.Check(context.Background(), in, nil); v.Status != 413 {
			t.Fatalf("cost 5 of 2/1m: %+v, want 413", v)
		}
	}
	cost = 2
	if v := l.Check(context.Background(), in, nil); !v.Allowed {
		t.Fatalf("cost 2 of 2/1m: %+v, want admitted", v)
	}
	if n := store.decides.Load(); n != 1 {
		t.Fatalf("the store was asked %d times, want once: for the request of cost 2 alone", n)
	}
}

// slowStore decides like a MemoryStore after a pause, as a store across a network would.
type slowStore struct {
	core.Store
	pause time.Duration
	fail  bool
}

func (s slowStore) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	time.Sleep(s.pause)
	if s.fail {
		return core.Decision{}, errors.New("i/o timeout")
	}
	return s.Store.Decide(ctx, q)
}

// An observer learns the limit's policy, a bounded label, and how long a store other than
// the MemoryStore took, for latency metrics, on decisions and on store failures alike.
func TestObserverSeesPolicyAndStoreTime(t *testing.T) {
	const pause = 2 * time.Millisecond
	in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}
	for _, c := range []struct {
		name  string
		store core.Store
		timed bool
		want  core.Outcome
	}{
		{"memory", core.NewMemoryStore(nil), false, core.Admitted},
		{"remote", slowStore{Store: core.NewMemoryStore(nil), pause: pause}, true, core.Admitted},
		{"remote-down", slowStore{pause: pause, fail: true}, true, core.Errored},
	} {
		var seen []core.Event
		l := adapter.Must(3, time.Minute, core.WithRate(10, time.Hour), core.WithStore(c.store),
			core.WithObserver(func(e core.Event) { seen = append(seen, e) }), core.WithErrorHook(func(context.Context, error) {}))
		l.Check(context.Background(), in, nil)
		if len(seen) != 1 {
			t.Fatalf("%s: %d events, want 1", c.name, len(seen))
		}
		e := seen[0]
		if e.Outcome != c.want || e.Policy == nil || e.Policy.String() != "3/1m,10/1h" {
			t.Errorf("%s: outcome %v, policy %v; want %v, 3/1m,10/1h", c.name, e.Outcome, e.Policy, c.want)
		}
		// A sleep lasts at least its length; only the lower bound is checked.
		if c.timed && e.StoreTime < pause || !c.timed && e.StoreTime != 0 {
			t.Errorf("%s: StoreTime %v, want %v", c.name, e.StoreTime, map[bool]string{true: ">= 2ms", false: "0"}[c.timed])
		}
	}
}

// A bad allow-list entry fails registration naming the value and the fix; a mapped IPv4
// prefix means its IPv4 form.
func TestAllowListEntries(t *testing.T) {
	_, err := adapter.New(1, time.Minute, core.WithAllowList("10.0.0.0/8", "10.0.0.300/8"))
	if err == nil || !strings.Contains(err.Error(), `"10.0.0.300/8"`) || !strings.Contains(err.Error(), `"10.0.0.0/8"`) {
		t.Fatalf("error %v, want it to name the bad entry and show a good one", err)
	}
	l := adapter.Must(1, time.Minute, core.WithAllowList("::ffff:10.0.0.0/104"))
	for i := range 3 {
		if v := l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "10.1.2.3:1"}, nil); !v.Allowed || !v.Skipped {
			t.Fatalf("request %d from 10.1.2.3: %+v, want exempt", i+1, v)
		}
	}
	if v := l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "11.0.0.1:1"}, nil); v.Skipped {
		t.Fatalf("11.0.0.1 exempt: %+v", v)
	}
}

// A Quota needs its limit named (WithScope) and registered; a store that cannot reset says so.
func TestQuotaNeedsANamedRegisteredLimit(t *testing.T) {
	var q core.Quota
	if _, err := q.Peek(context.Background(), "k"); !errors.Is(err, core.ErrQuotaNotRegistered) {
		t.Fatalf("Peek before registration: %v, want the unregistered error", err)
	}
	if err := q.Reset(context.Background(), "k"); !errors.Is(err, core.ErrQuotaNotRegistered) {
		t.Fatalf("Reset before registration: %v, want the unregistered error", err)
	}
	if _, err := adapter.New(3, time.Minute, core.WithQuota(&q)); err == nil || !strings.Contains(err.Error(), "WithScope") {
		t.Fatalf("WithQuota without WithScope: %v, want an error naming WithScope", err)
	}
	adapter.Must(3, time.Minute, core.WithScope("s"), core.WithQuota(&q), core.WithStore(downStore{}))
	if err := q.Reset(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "cannot reset") {
		t.Fatalf("Reset on a store without Reset: %v", err)
	}
	if _, err := q.Peek(context.Background(), "k"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Peek on a failing store: %v, want its error", err)
	}
}

// A bad tier fails registration naming the tier and the value.
func TestTiersValidatedAtRegistration(t *testing.T) {
	pick := func(core.Request) string { return "" }
	for _, c := range []struct {
		tiers map[string]string
		want  []string
	}{
		{map[string]string{"paid": "1000/1h", "gold": "10/soon"}, []string{`tier "gold"`, `"soon"`}},
		{map[string]string{"": "5/1m"}, []string{`tier named ""`}},
		{map[string]string{"fast": "3/60ns"}, []string{`tier "fast"`, "WithShortPeriods"}},
		{nil, []string{"at least one tier"}},
	} {
		_, err := adapter.New(1, time.Minute, core.WithTiers(pick, c.tiers))
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("tiers %v: error %v, want it to contain %q", c.tiers, err, w)
			}
		}
	}
}

// A Quota given to several limits (registered in different places, or by one
// grpclimit.New) reaches them all: Reset forgets the key in each, Peek answers with the
// tightest. A limit registered again from the same place (a router rebuilt while the old
// one is still in use) reaches the same buckets as its earlier self: Reset and Peek ask
// the store once for both.
func TestQuotaReachesEveryLimitItIsGiven(t *testing.T) {
	q := new(core.Quota)
	store := &countingStore{MemoryStore: core.NewMemoryStore(nil)}
	opts := []core.Option{core.WithStore(store), core.WithScope("auth"), core.WithQuota(q)}
	login := adapter.Must(1, time.Minute, opts...)
	var reset, again adapter.Limiter
	for i := range 2 { // the second registered again from the same place: a router rebuilt
		again = adapter.Must(2, time.Minute, opts...)
		if i == 0 {
			reset = again
		}
	}
	in := adapter.Input{Route: "/x", Peer: "192.0.2.1:1"}
	if got := admitted([]adapter.Limiter{login}, in, 2); got != 1 {
		t.Fatalf("1/1m: %d of 2 admitted", got)
	}
	if got := admitted([]adapter.Limiter{reset}, in, 1); got != 1 {
		t.Fatalf("2/1m: %d of 1 admitted", got)
	}
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil || d.Allowed || d.Rate.Count != 1 {
		t.Fatalf("Peek with 1/1m spent and 2/1m not: %+v %v; want the tightest answer, 1/1m's refusal", d, err)
	}
	if err := q.Reset(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if n := store.resets.Load(); n != 2 {
		t.Errorf("Reset of three limits, two alike: %d store resets, want 2", n)
	}
	for name, c := range map[string]struct {
		l adapter.Limiter
		n int
	}{"1/1m": {login, 1}, "2/1m registered again": {again, 2}} {
		if got := admitted([]adapter.Limiter{c.l}, in, c.n+1); got != c.n {
			t.Errorf("%s after Quota.Reset: %d of %d admitted, want %d", name, got, c.n+1, c.n)
		}
	}
	decides := store.decides.Load()
	d, err = q.Peek(context.Background(), "192.0.2.1")
	if err != nil || d.Allowed || d.RetryAfter < 59*time.Second {
		t.Fatalf("Peek with both spent: %+v %v; want a refusal", d, err)
	}
	if n := store.decides.Load() - decides; n != 2 {
		t.Errorf("Peek of three limits, two alike: %d store decisions, want 2", n)
	}
	runtime.KeepAlive(reset)
}

// A router rebuilt with another policy for a limit (a configuration reload) registers it
// again from the same place: its Quota answers from the new limit only, not the one no
// longer in use, once that is collected.
func TestQuotaFollowsALimitRegisteredAgain(t *testing.T) {
	q := new(core.Quota)
	var live adapter.Limiter
	for _, n := range []int{5, 100} {
		live = adapter.Must(n, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("login"), core.WithQuota(q))
	}
	runtime.GC()
	in := adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}
	if got := admitted([]adapter.Limiter{live}, in, 3); got != 3 {
		t.Fatalf("%d of 3 admitted", got)
	}
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil || d.Rate.Count != 100 || d.Remaining != 97 {
		t.Fatalf("Peek after 3 requests to the reloaded 100/1m limit: %+v %v; want 100/1m with 97 left", d, err)
	}
	if n := core.QuotaLimits(q); n != 1 {
		t.Errorf("the Quota reaches %d limits, want 1", n)
	}
}

// Observers add up: an application that gives a limit two (both metrics integrations, or
// metrics and its own log) has each called with every event, in the order given; a nil
// observer adds nothing.
func TestObserversAddUp(t *testing.T) {
	var seen []string
	l := adapter.Must(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithObserver(func(e core.Event) { seen = append(seen, "first "+e.Outcome.String()) }),
		core.WithObserver(nil),
		core.WithObserver(func(e core.Event) { seen = append(seen, "second "+e.Outcome.String()) }))
	l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}, nil)
	if want := []string{"first admitted", "second admitted"}; !slices.Equal(seen, want) {
		t.Errorf("two observers saw %q, want %q", seen, want)
	}
}
