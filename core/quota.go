package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// A Quota reaches a registered limit's buckets outside requests: forget a client's grants
// or see what it has left. Hand it to a limit named with WithScope, so that every instance
// names the buckets alike:
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
	mu sync.Mutex // serializes registrations
	ls atomic.Pointer[[]*limiter]
}

// quotaEntry says where, and in which call, a limit a Quota reaches was registered.
type quotaEntry struct {
	site  string
	batch any
}

// errNoLimit is returned by a Quota whose limit has not been registered.
var errNoLimit = errors.New("reqlimit: the quota's limit is not registered (WithQuota)")

// register adds l, registered at site (its caller's stack) in batch (hook.BatchKey's
// value, nil for a limit registered alone), to the limits q reaches. A limit of the same
// scope registered earlier from the same site in another call is replaced: a router
// rebuilt (on a configuration reload, say) registers its limits again, maybe with other
// policies, and the limit it no longer uses must not answer Peek. The limits one call
// registers (grpclimit.New's, one per method) stay together.
func (q *Quota) register(l *limiter, site string, batch any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l.quotaEntry = quotaEntry{site: site, batch: batch}
	var ls []*limiter
	if old := q.ls.Load(); old != nil {
		for _, o := range *old {
			if o.quotaEntry.site != site || o.cfg.scope != l.cfg.scope || batch != nil && o.quotaEntry.batch == batch {
				ls = append(ls, o)
			}
		}
	}
	ls = append(ls, l)
	q.ls.Store(&ls)
}

// limits returns the limits q reaches, or errNoLimit for none.
func (q *Quota) limits() ([]*limiter, error) {
	ls := q.ls.Load()
	if ls == nil {
		return nil, errNoLimit
	}
	return *ls, nil
}

// A Resetter is a Store that can forget a bucket, every rate at once (concurrent decisions
// see it before or after); Quota.Reset needs it.
type Resetter interface {
	Reset(ctx context.Context, q Query) error
}

// WithQuota makes q reach this limit's buckets too; the limit needs WithScope.
func WithQuota(q *Quota) Option {
	return func(c *config) error {
		if q == nil {
			return errors.New("WithQuota(nil): pass a *core.Quota, such as new(core.Quota)")
		}
		c.quota = q
		return nil
	}
}

// Reset forgets every grant of key, in the limits' rates and their tiers'. Other processes
// on a redisstore may refuse key from their deny caches until the cached wait ends (see
// redisstore.WithDenyCache).
func (q *Quota) Reset(ctx context.Context, key string) error {
	ls, err := q.limits()
	if err != nil {
		return err
	}
	for _, l := range ls {
		if err := l.reset(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (l *limiter) reset(ctx context.Context, key string) error {
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

// Peek reports the limits' tightest answer for key now, recording nothing.
func (q *Quota) Peek(ctx context.Context, key string) (Decision, error) {
	ls, err := q.limits()
	if err != nil {
		return Decision{}, err
	}
	var tightest Decision
	for i, l := range ls {
		d, err := l.store.Decide(ctx, Query{Policy: l.policy, Scope: l.cfg.scope, Key: key, Mode: Peek, Cost: 1})
		if err != nil {
			return Decision{}, fmt.Errorf("reqlimit: peek %q of %s: %w", key, l.policy, err)
		}
		if i == 0 || tighter(d, tightest) {
			tightest = d
		}
	}
	return tightest, nil
}

// tighter reports whether a binds more than b: refused where b is admitted, or refused
// longer, or admitted with less left.
func tighter(a, b Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		return a.RetryAfter > b.RetryAfter
	}
	return a.Remaining < b.Remaining
}
