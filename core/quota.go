package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// A Quota reaches a registered limit's buckets outside requests: forget a client's grants
// (a login limit, after a successful password reset) or look up what it has left without
// spending any (a dashboard). Hand it to the limit with WithQuota, which needs the limit to
// be named with WithScope, so that every instance names the buckets alike:
//
//	login := new(core.Quota)
//	r.POST("/login", ginlimit.Limit(5, 15*time.Minute, core.WithScope("login"), core.WithKey(byUser), core.WithQuota(login)), h)
//	...
//	err := login.Reset(ctx, "alice")
//
// key is what the limit keys by: the key function's value, or the client's address as the
// limit writes it ("192.0.2.1"; IPv6 as its /64, "2001:db8:1:2::/64"). A Quota's methods
// are safe for concurrent use, with each other and with requests. Before its limit is
// registered, they fail.
type Quota struct {
	l atomic.Pointer[limiter]
}

// errNoLimit is returned by a Quota whose limit has not been registered.
var errNoLimit = errors.New("reqlimit: the quota's limit is not registered (WithQuota)")

// A Resetter is a Store that can forget a bucket: its grants of every rate, as if it had
// never been used. Decisions on the bucket that run at the same time see it before or
// after, never half reset. MemoryStore and the Redis store implement it.
type Resetter interface {
	Reset(ctx context.Context, q Query) error
}

// WithQuota makes q reach this limit's buckets (see Quota). The limit needs WithScope.
func WithQuota(q *Quota) Option {
	return func(c *config) error {
		if q == nil {
			return errors.New("WithQuota(nil): pass a *core.Quota, such as new(core.Quota)")
		}
		c.quota = q
		return nil
	}
}

// Reset forgets key's grants in every rate of the limit.
func (q *Quota) Reset(ctx context.Context, key string) error {
	l := q.l.Load()
	if l == nil {
		return errNoLimit
	}
	r, ok := l.store.(Resetter)
	if !ok {
		return fmt.Errorf("reqlimit: reset %q of %s: the store %T cannot reset a key (see core.Resetter)", key, l.policy, l.store)
	}
	if err := r.Reset(ctx, Query{Policy: l.policy, Scope: l.cfg.scope, Key: key}); err != nil {
		return fmt.Errorf("reqlimit: reset %q of %s: %w", key, l.policy, err)
	}
	return nil
}

// Peek reports what a request from key would be told now, without recording it: Allowed,
// Remaining, and RetryAfter when it would be refused.
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
