package core

import (
	"context"
	"fmt"
	"time"
)

// A Counter counts weighted events per key over a sliding window outside HTTP (failed
// logins, bytes per tenant); counts saturate at the capacity.
type Counter struct {
	store  Store
	policy *Policy
	name   string // as the application gave it, for messages
	scope  string // the name set apart from every limit's scope
}

// NewCounter counts up to capacity events per key over window; name sets its keys apart,
// and a nil store means the default store.
func NewCounter(name string, capacity int, window time.Duration, store Store) (*Counter, error) {
	p, err := NewPolicy(Rate{Count: capacity, Period: window})
	if err == nil {
		err = p.checkFloor(0)
	}
	if err != nil {
		return nil, fmt.Errorf("counter %q: %w", name, err)
	}
	if store == nil {
		store = theDefaultStore()
	} else if err := checkStore("NewCounter", store); err != nil {
		return nil, fmt.Errorf("counter %q: %w", name, err)
	}
	return &Counter{store: store, policy: p, name: name, scope: "\x00counter " + name}, nil
}

// Add records weight (at least 1) events for key now and returns the window's count, them
// included; a weight above the capacity fails with ErrCostTooHigh.
func (c *Counter) Add(ctx context.Context, key string, weight int) (int, error) {
	if weight < 1 {
		// A store counts a cost below 1 as 1: recording an event the caller did not mean.
		return 0, fmt.Errorf("reqlimit: counter %q: Add(%q, %d): want a weight of at least 1", c.name, key, weight)
	}
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.scope, Key: key, Cost: weight, Mode: Penalty})
	if err != nil {
		return 0, fmt.Errorf("reqlimit: counter %q: Add(%q, %d): %w", c.name, key, weight, err)
	}
	return d.Rate.Count - d.Remaining, nil
}

// Count returns the count for key in the window ending now.
func (c *Counter) Count(ctx context.Context, key string) (int, error) {
	d, err := c.store.Decide(ctx, Query{Policy: c.policy, Scope: c.scope, Key: key, Mode: Peek})
	if err != nil {
		return 0, fmt.Errorf("reqlimit: counter %q: Count(%q): %w", c.name, key, err)
	}
	return d.Rate.Count - d.Remaining, nil
}
