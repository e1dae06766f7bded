package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

func TestCounterSlides(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(0, 0))
	store := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	c, err := core.NewCounter("logins", 10, time.Minute, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		advance time.Duration
		add     int // 0: just count
		want    int
	}{
		{0, 2, 2},
		{20 * time.Second, 3, 5},
		{39 * time.Second, 0, 5}, // 59s: both batches inside
		{1 * time.Second, 0, 3},  // 60s: the first batch has left
		{20 * time.Second, 0, 0}, // 80s: all gone
		{0, 4, 4},
		{0, 9, 10}, // saturates at capacity
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		var got int
		if s.add > 0 {
			got, err = c.Add(ctx, "alice", s.add)
		} else {
			got, err = c.Count(ctx, "alice")
		}
		if err != nil || got != s.want {
			t.Fatalf("step %d: got %d, %v; want %d", i, got, err, s.want)
		}
	}
	if n, _ := c.Count(ctx, "bob"); n != 0 {
		t.Fatalf("bob has %d events", n)
	}
	if _, err := c.Add(ctx, "alice", 11); err == nil {
		t.Fatal("a weight above the capacity was accepted")
	}
}

// A weight below 1 is an error, not one event recorded behind the caller's back.
func TestCounterAddRefusesWeightBelowOne(t *testing.T) {
	c, err := core.NewCounter("logins", 10, time.Minute, core.NewMemoryStore(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, w := range []int{0, -5} {
		if n, err := c.Add(ctx, "k", w); err == nil || !strings.Contains(err.Error(), fmt.Sprint(w)) || !strings.Contains(err.Error(), `counter "logins"`) {
			t.Errorf("Add(k, %d) = %d, %v; want an error naming the counter as given and the weight", w, n, err)
		}
	}
	if n, err := c.Count(ctx, "k"); n != 0 || err != nil {
		t.Fatalf("Count(k) = %d, %v after refused weights; want 0", n, err)
	}
	if n, err := c.Add(ctx, "k", 1); n != 1 || err != nil {
		t.Fatalf("Add(k, 1) = %d, %v; want 1", n, err)
	}
}

// A store's error names the counter and the call, and still matches what it wraps.
func TestCounterErrorsNameTheCounter(t *testing.T) {
	c, err := core.NewCounter("logins", 10, time.Minute, core.NewMemoryStore(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Add(context.Background(), "alice", 11)
	if !errors.Is(err, core.ErrCostTooHigh) || !strings.Contains(err.Error(), `counter "logins": Add("alice", 11)`) {
		t.Errorf("Add(alice, 11) on 10/1m: %v; want ErrCostTooHigh, naming the counter and the call", err)
	}
}
