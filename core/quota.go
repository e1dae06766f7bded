package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
)

// A Quota reaches a registered limit's buckets outside requests: forget a client's grants
// (after a password reset, say) or see what it has left without spending any. Hand it to a
// limit named with WithScope, so that every instance names the buckets alike:
//
//	login := new(core.Quota)
//	r.POST("/login", ginlimit.Limit(5, 15*time.Minute, core.WithScope("login"), core.WithKey(byUser), core.WithQuota(login)), h)
//	...
//	err := login.Reset(ctx, "alice")
//
// key is what the limit keys by: the key function's value, or the client's address as the
// limit writes it ("192.0.2.1"; IPv6 as its /64, "2001:db8:1:2::/64"), which Reset also
// finds where a key function gave none. Safe for concurrent use; fails until registered.
type Quota struct {
	l atomic.Pointer[limiter]
}

// errNoLimit is returned by a Quota whose limit has not been registered.
var errNoLimit = errors.New("reqlimit: the quota's limit is not registered (WithQuota)")

// A Resetter is a Store that can forget a bucket, every rate at once (concurrent decisions
// see it before or after); Quota.Reset needs it.
type Resetter interface {
	Reset(ctx context.Context, q Query) error
}

// WithQuota makes q reach this limit's buckets; the limit needs WithScope.
func WithQuota(q *Quota) Option {
	return func(c *config) error {
		if q == nil {
			return errors.New("WithQuota(nil): pass a *core.Quota, such as new(core.Quota)")
		}
		c.quota = q
		return nil
	}
}

// Reset forgets every grant of key, in the limit's rates and its tiers'.
func (q *Quota) Reset(ctx context.Context, key string) error {
	l := q.l.Load()
	if l == nil {
		return errNoLimit
	}
	r, ok := l.store.(Resetter)
	if !ok {
		return fmt.Errorf("reqlimit: reset %q of %s: the store %T cannot reset a key (see core.Resetter)", key, l.policy, l.store)
	}
	keys := []string{key}
	if l.cfg.key != nil {
		keys = append(keys, fallbackKeyPrefix+key)
	}
	for _, t := range append([]*limiter{l}, slices.Collect(maps.Values(l.tiers))...) {
		if t == nil { // an unlimited tier
			continue
		}
		for _, k := range keys {
			if err := r.Reset(ctx, Query{Policy: t.policy, Scope: t.scope(""), Key: k}); err != nil {
				return fmt.Errorf("reqlimit: reset %q of %s: %w", key, t.policy, err)
			}
		}
	}
	return nil
}

// Peek reports what the limit's own policy tells key now, recording nothing.
func (q *Quota) Peek(ctx context.Context, key string) (Decision, error) {
	l := q.l.Load()
	if l == nil {
		return Decision{}, errNoLimit
	}
	d, err := l.store.Decide(ctx, Query{Policy: l.policy, Scope: l.cfg.scope, Key: key, Mode: Peek, Cost: 1})
	if err != nil {
		return Decision{}, fmt.Errorf("reqlimit: peek %q of %s: %w", key, l.policy, err)
	}
	return d, nil
}
