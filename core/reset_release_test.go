package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Giving back (Release) a grant that a Reset already forgot changes nothing. The stores
// find the grant to give back by its time (the exact ring: an entry equal to
// Decision.Grant; a bounded rate: the bucket of that time), so
// after a Reset, grants recorded later at the same time were taken for the forgotten one,
// and one of them was given back: one request more than the count in one window.

// releaseAfterReset admits one grant (the one a WithCountWhen request holds while in
// flight), resets the bucket (Quota.Reset), fills the whole quota again after the reset,
// then gives the first grant back, and wants the next request refused.
func releaseAfterReset(t *testing.T, s *core.MemoryStore, clock *storetest.ManualClock, p *core.Policy, step time.Duration) {
	t.Helper()
	ctx := context.Background()
	q := core.Query{Policy: p, Scope: "login", Key: "alice"}
	n := p.Rates()[0].Count
	first, err := s.Decide(ctx, q)
	if err != nil || !first.Allowed {
		t.Fatalf("first request: %+v %v", first, err)
	}
	clock.Advance(step)
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		clock.Advance(step)
		if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
			t.Fatalf("request %d after the reset: %+v %v", i+1, d, err)
		}
	}
	// The first grant was forgotten by the reset: giving it back must change nothing.
	if err := s.Release(ctx, q, first.Grant); err != nil {
		t.Fatal(err)
	}
	clock.Advance(step)
	if d, _ := s.Decide(ctx, q); d.Allowed {
		t.Fatalf("%v: %d grants recorded after the reset, all within %v, and one more admitted: giving back a grant the reset had forgotten took away one made after it (%+v)",
			p, n, time.Duration(n+1)*step, d)
	}
}

// A rate above 256 per period is counted in 100 buckets of T/100 (36 s for an hour): a
// grant made before the reset is given back out of the bucket that holds the new ones.
func TestReleaseAfterResetBounded(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	releaseAfterReset(t, s, clock, mustParse("300/1h"), 10*time.Millisecond)
}

// The exact log, on a clock that did not move between the grants (a coarse clock, or a
// test's).
func TestReleaseAfterResetExact(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	releaseAfterReset(t, s, clock, mustParse("5/15m"), 0)
}

// The same through a limit, as docs/operations.md describes it: a login limit counting
// only failed attempts (WithCountWhen(Failed)), reset by its Quota after a password reset.
// A login in flight during the reset succeeds afterwards, and its slot is given back: one
// failed attempt more than the limit is then admitted within the window.
//
// docs/operations.md, "Counting failed attempts": "in any interval of the period at most
// the limit's count of requests that count are admitted".
func TestCountWhenReleaseAfterQuotaReset(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		count  int
		period time.Duration
	}{
		{"bounded 300/1h", 300, time.Hour},
		{"exact 5/15m", 5, 15 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			quota := new(core.Quota)
			store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
			l, err := adapter.New(c.count, c.period, core.WithStore(store), core.WithScope("login-"+c.name),
				core.WithCountWhen(core.Failed), core.WithQuota(quota))
			if err != nil {
				t.Fatal(err)
			}
			in := adapter.Input{Route: "POST /login", Peer: "192.0.2.1:1"}
			inFlight := l.Check(ctx, in, nil) // a login whose handler is still running
			if !inFlight.Allowed {
				t.Fatal("first login refused")
			}
			clock.Advance(time.Millisecond)
			if err := quota.Reset(ctx, "192.0.2.1"); err != nil { // the password was reset
				t.Fatal(err)
			}
			failed := 0
			for range c.count { // failed attempts after the reset: each counts
				clock.Advance(time.Millisecond)
				v := l.Check(ctx, in, nil)
				if !v.Allowed {
					t.Fatalf("failed attempt %d after the reset refused", failed+1)
				}
				l.Settle(ctx, v, 401)
				failed++
			}
			l.Settle(ctx, inFlight, 200) // the login in flight succeeded: its slot goes back
			clock.Advance(time.Millisecond)
			v := l.Check(ctx, in, nil)
			if v.Allowed {
				l.Settle(ctx, v, 401)
				t.Fatalf("%d failed attempts counted within %v, then one more admitted (and failed): %d counted in one window of a %d/%v limit",
					failed, time.Duration(failed+2)*time.Millisecond, failed+1, c.count, c.period)
			}
		})
	}
}

// A reset key is swept like any idle key once every grant the reset forgot is out of every
// window: a store that resets keys all day holds the keys of about two periods, not of
// every reset.
func TestResetKeysAreSwept(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	p := mustPolicy(core.Rate{Count: 1, Period: time.Second})
	ctx := context.Background()
	for i := range 2000 {
		q := core.Query{Policy: p, Key: fmt.Sprint("user-", i)}
		if _, err := s.Decide(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := s.Reset(ctx, q); err != nil {
			t.Fatal(err)
		}
		clock.Advance(100 * time.Millisecond) // two periods hold 20 resets
	}
	held := core.ResetKeys(s, p)
	core.SweepNow(s)
	if n := core.ResetKeys(s, p); n < 19 || n > 21 || s.Len() != n {
		t.Fatalf("%d keys held, %d of them reset, after 2000 resets and a sweep, 20 of them within two periods (%d held before the sweep)", s.Len(), n, held)
	}
}

// After a Quota.Reset, requests admitted at the reset's clock reading give their slots
// back like any others: the key's grants since the reset are recorded after it
// (MemoryStore.Reset), so Release tells them from those the reset forgot. A login limit counting failed attempts, reset after a lockout, then
// successful logins: none counts, and the next request is admitted.
func TestGrantsAfterAResetAreGivenBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		count  int
		period time.Duration
		after  time.Duration // from the reset to the requests
	}{
		{"exact", 3, 15 * time.Minute, 0},
		{"exact-1ms-later", 3, 15 * time.Minute, time.Millisecond},
		{"bounded", 300, 15 * time.Minute, 0},
	} {
		t.Run(c.name, func(t *testing.T) { grantsAfterReset(t, c.name, c.count, c.period, c.after) })
	}
}

func grantsAfterReset(t *testing.T, name string, count int, period, after time.Duration) {
	ctx := context.Background()
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	quota := new(core.Quota)
	l, err := adapter.New(count, period, core.WithStore(store), core.WithScope("login-"+name),
		core.WithCountWhen(core.Failed), core.WithQuota(quota))
	if err != nil {
		t.Fatal(err)
	}
	in := adapter.Input{Route: "POST /login", Peer: "192.0.2.1:1"}
	clock.Advance(10 * time.Second)
	// Failed attempts lock the client out; then its password is reset.
	for range count {
		l.Settle(ctx, l.Check(ctx, in, nil), 401)
	}
	if l.Check(ctx, in, nil).Allowed {
		t.Fatal("not locked out after the failed attempts")
	}
	clock.Advance(10*time.Second + time.Millisecond) // off a unit's edge, as a real clock is
	if err := quota.Reset(ctx, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(after)
	// Successful logins right after the reset, on the reset's clock reading: none counts.
	for i := range count {
		v := l.Check(ctx, in, nil)
		if !v.Allowed {
			t.Fatalf("success %d after the reset refused", i+1)
		}
		l.Settle(ctx, v, 200)
	}
	clock.Advance(time.Second)
	if v := l.Check(ctx, in, nil); !v.Allowed {
		t.Fatalf("%d successful requests after a Quota.Reset (none counts under WithCountWhen(Failed)), then the next refused for %v: their slots were not given back",
			count, v.Decision.RetryAfter)
	}
}
