package core

import (
	"context"
	"fmt"
	"time"
)

// A Counter counts weighted events per key over a sliding window, for uses outside HTTP:
// failed logins per account, messages per user, bytes per tenant. It runs on the same
// engine and stores as the limits, so it is exact, shared across instances with a Redis
// store, and bounded in memory.
//
// Counts saturate at the counter's capacity: Count never reports more than capacity, which
// is all a threshold check needs. Capacities above ExactMax use the bounded form and may
// count an event up to window/BoundedBuckets longer than the window.
type Counter struct {
	store  Store
	policy *Policy
	name   string
}

// NewCounter returns a counter of events over window, counting up to capacity per key.
// name keeps its keys apart from other counters' and limits'. A nil store means the
// default store.
func NewCounter(name string, capacity int, window time.Duration, store Store) (*Counter, error) {
	p, err := NewPolicy(Rate{Count: capacity, Period: window})
	if err == nil {
		err = p.checkFloor()
	}
	if err != nil {
		return nil, fmt.Errorf("counter %q: %w", name, err)
	}
	if store == nil {
		store = DefaultStore()
	}
	return &Counter{store: store, policy: p, name: "\x00counter " + name}, nil
}

// Add records weight events for key now and returns the count in the window, including
// them. A weight below 1 counts as 1; above the capacity it fails with ErrCostTooHigh.
func (c *Counter) Add(ctx context.Context, key string, weight int) (int, error) {
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.name, Key: key, Cost: weight, Mode: Penalty})
	if err != nil {
		return 0, err
	}
	return d.Limit - d.Remaining, nil
}

// Count returns the number of events recorded for key in the window ending now.
func (c *Counter) Count(ctx context.Context, key string) (int, error) {
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.name, Key: key, Mode: Peek})
	if err != nil {
		return 0, err
	}
	return d.Limit - d.Remaining, nil
}

// Capacity returns the count at which the counter saturates.
func (c *Counter) Capacity() int { return c.policy.rates[0].Count }
