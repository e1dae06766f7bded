package core

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A store made in a testing/synctest bubble keeps the bubble's time there; once the
// bubble has ended it is read from outside, where the bubble's clock means nothing. It must
// then not leap ahead (every grant made in the bubble would leave its window) nor follow
// the wall clock.

// TestMemoryStoreMadeInBubbleStaysStrictAfterIt: one request per hour, admitted in a
// bubble; a second request a moment later (real time), after the bubble, must be refused.
func TestMemoryStoreMadeInBubbleStaysStrictAfterIt(t *testing.T) {
	ctx := context.Background()
	p, err := NewPolicy(Rate{Count: 1, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Policy: p, Scope: "GET /user/test", Key: "192.0.2.1"}
	var s *MemoryStore
	var inside int64
	synctest.Test(t, func(t *testing.T) {
		s = NewMemoryStore(nil)
		if d, err := s.Decide(ctx, q); err != nil || !d.Allowed {
			t.Fatalf("first request in the bubble: %+v, %v; want admitted", d, err)
		}
		if d, err := s.Decide(ctx, q); err != nil || d.Allowed {
			t.Fatalf("second request in the bubble: %+v, %v; want refused", d, err)
		}
		inside = s.now()
	})
	realStart := time.Now()
	d, err := s.Decide(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Errorf("1/1h: a second request was admitted %v (real time) after the first, once the bubble the store was made in had ended: "+
			"the store's clock read %v in the bubble and %v (%.1f years) just after it",
			time.Since(realStart), time.Duration(inside), time.Duration(s.now()), time.Duration(s.now()).Hours()/24/365.25)
	}
	// Outside its bubble such a store (the process's default, made by a test in one) is
	// still allocation-free per decision.
	if n := testing.AllocsPerRun(100, func() { s.Decide(ctx, q) }); n != 0 {
		t.Errorf("%v allocations per decision outside the bubble the store was made in", n)
	}
}

// TestDefaultStoreMadeInBubbleStaysStrictOutsideIt: the process-wide default store is made
// by the first limit or counter that takes it, inside a synctest bubble if a test binary's
// first such test runs in one; later limits and counters use it outside any bubble. The
// default store is emptied here, and restored after, as a fresh process has it.
func TestDefaultStoreMadeInBubbleStaysStrictOutsideIt(t *testing.T) {
	defaultStore.Lock()
	saved, savedUsed := defaultStore.store, defaultStore.used
	defaultStore.store, defaultStore.used = nil, false
	defaultStore.Unlock()
	t.Cleanup(func() {
		defaultStore.Lock()
		defaultStore.store, defaultStore.used = saved, savedUsed
		defaultStore.Unlock()
	})

	ctx := context.Background()
	var c *Counter
	synctest.Test(t, func(t *testing.T) {
		var err error
		c, err = NewCounter("bubble", 10, time.Hour, nil) // the first to take the default store
		if err != nil {
			t.Fatal(err)
		}
		if n, err := c.Add(ctx, "k", 1); err != nil || n != 1 {
			t.Fatalf("Add in the bubble: %d, %v; want 1", n, err)
		}
	})
	// A moment later, outside any bubble: the event is well inside its hour.
	n, err := c.Count(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		m := defaultStore.store.(*MemoryStore)
		t.Errorf("default store made in a bubble: an event counted a moment ago (10/1h) is gone outside it: Count = %d, want 1; the default store's clock reads %v",
			n, time.Duration(m.now()))
	}
}
