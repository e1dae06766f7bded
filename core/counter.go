package core

import (
	"context"
	"fmt"
	"time"
)

// A Counter counts weighted events per key over a sliding window, outside HTTP (failed
// logins per account, bytes per tenant), on the limits' engine and stores. Counts
// saturate at the capacity, which is all a threshold check needs.
type Counter struct {
	store  Store
	policy *Policy
	name   string
}

// NewCounter returns a counter of up to capacity events per key over window. name keeps
// its keys apart from other counters'; a nil store means the default store.
func NewCounter(name string, capacity int, window time.Duration, store Store) (*Counter, error) {
	p, err := NewPolicy(Rate{Count: capacity, Period: window})
	if err == nil {
		err = p.checkFloor()
	}
	if err != nil {
		return nil, fmt.Errorf("counter %q: %w", name, err)
	}
	if store == nil {
		store = theDefaultStore()
	}
	return &Counter{store: store, policy: p, name: "\x00counter " + name}, nil
}

// Add records weight events for key now and returns the count in the window, them
// included. A weight above the capacity fails with ErrCostTooHigh.
func (c *Counter) Add(ctx context.Context, key string, weight int) (int, error) {
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.name, Key: key, Cost: weight, Mode: Penalty})
	if err != nil {
		return 0, err
	}
	return d.Rate.Count - d.Remaining, nil
}

// Count returns the count for key in the window ending now.
func (c *Counter) Count(ctx context.Context, key string) (int, error) {
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.name, Key: key, Mode: Peek})
	if err != nil {
		return 0, err
	}
	return d.Rate.Count - d.Remaining, nil
}
