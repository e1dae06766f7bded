package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"weak"
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
// key is what the limit keys by: the key function's value, or the client's address
// ("192.0.2.1"; for IPv6 any address in its /64, or "2001:db8:1:2::/64"), which Reset and
// Peek also find where a key function gave none. Safe for concurrent use; fails until
// registered.
type Quota struct {
	mu   sync.Mutex
	last map[string]quotaBatch // the last batch registered from each site and scope
	ls   []weak.Pointer[limiter]
}

// A quotaBatch is the limits one call registered: one for an adapter's Limit, one per
// method for grpclimit.New, which marks its call with hook.BatchKey.
type quotaBatch struct {
	id any // the call's hook.BatchKey value, nil for a limit registered alone
	ls []*limiter
}

// errNoLimit is returned by a Quota whose limit has not been registered.
var errNoLimit = errors.New("reqlimit: the quota's limit is not registered (WithQuota)")

// register adds l, registered at site in batch (hook.BatchKey's value), to the limits q
// reaches. q holds limits weakly, so that a rebuilt router's old limits stop answering
// once collected (until then their answer is the stricter), and the last batch from each
// site and scope strongly, so that limits registered only to be reset stay reached.
func (q *Quota) register(l *limiter, site string, batch any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.last == nil {
		q.last = map[string]quotaBatch{}
	}
	site += "\x00" + l.cfg.scope
	b := q.last[site]
	if batch == nil || b.id != batch {
		b = quotaBatch{id: batch}
	}
	b.ls = append(b.ls, l)
	q.last[site] = b
	q.ls = slices.DeleteFunc(q.ls, func(w weak.Pointer[limiter]) bool { return w.Value() == nil })
	q.ls = append(q.ls, weak.Make(l))
}

// limits returns the limits q reaches, or errNoLimit before one is registered.
func (q *Quota) limits() ([]*limiter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ls == nil {
		return nil, errNoLimit
	}
	var ls []*limiter
	for _, w := range q.ls {
		if l := w.Value(); l != nil {
			ls = append(ls, l)
		}
	}
	return ls, nil
}

// A Resetter is a Store that can forget a bucket, every rate at once (concurrent decisions
// see it before or after); Quota.Reset needs it.
type Resetter interface {
	Reset(ctx context.Context, q Query) error
}

// WithQuota makes q reach this limit's buckets too; the limit needs WithScope.
func WithQuota(q *Quota) Option {
	return func(c *config) error {
		c.quota = q
		return require(q != nil, "WithQuota(nil): pass a *core.Quota, such as new(core.Quota)")
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
	// A bucket that fails to reset does not keep the others from resetting.
	done := map[bucketID]bool{}
	var errs []error
	for _, l := range ls {
		r, ok := l.store.(Resetter)
		if !ok {
			errs = append(errs, fmt.Errorf("reqlimit: reset %q of %s: the store %T cannot reset a key (see core.Resetter)", key, l.policy, l.store))
			continue
		}
		for _, b := range l.buckets(key) {
			if done[b.id] {
				continue
			}
			done[b.id] = true
			if err := r.Reset(ctx, b.q); err != nil {
				errs = append(errs, fmt.Errorf("reqlimit: reset %q of %s: %w", key, b.q.Policy, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Peek reports the limits' tightest answer for key now, recording nothing. A limit answers
// from the tightest of its buckets of key holding grants (its tiers', the address
// fallback's), else from its own policy.
func (q *Quota) Peek(ctx context.Context, key string) (Decision, error) {
	ls, err := q.limits()
	if err != nil {
		return Decision{}, err
	}
	seen := map[bucketID]Decision{}
	var tightest Decision
	for i, l := range ls {
		d, err := l.peek(ctx, key, seen)
		if err != nil {
			return Decision{}, err
		}
		if i == 0 || tighter(d, tightest) {
			tightest = d
		}
	}
	return tightest, nil
}

// peek is l's answer for key (see Quota.Peek), asking the store only for the buckets not
// in seen. With no request to pick a tier by, the buckets holding grants are those the
// client's requests went to: a fresh free tier's 2/1m is tighter than a paid 5/1m with 3
// left, but the paid tier is what refuses the client.
func (l *limiter) peek(ctx context.Context, key string, seen map[bucketID]Decision) (Decision, error) {
	var own, held Decision
	for i, b := range l.buckets(key) {
		d, ok := seen[b.id]
		if !ok {
			var err error
			if d, err = l.store.Decide(ctx, b.q); err != nil {
				return Decision{}, fmt.Errorf("reqlimit: peek %q of %s: %w", key, b.q.Policy, err)
			}
			seen[b.id] = d
		}
		if i == 0 {
			own = d
		}
		if d.FullReset > 0 && (held.FullReset == 0 || tighter(d, held)) {
			held = d
		}
	}
	if held.FullReset == 0 {
		return own, nil
	}
	return held, nil
}

// A bucketID names a bucket across limits, so that Reset and Peek ask for it once: its
// store (or, for a store that cannot be compared, the limit), policy (and ident, which
// the scope lacks in a MemoryStore), scope and key.
type bucketID struct {
	store              any
	policy, scope, key string
}

// A quotaBucket is one of a limit's buckets of a key, with the query that peeks it.
type quotaBucket struct {
	id bucketID
	q  Query
}

// buckets lists l's buckets of key, its own policy's first: its policy's and its counted
// tiers', each under key and, with a key function, under the address fallback.
func (l *limiter) buckets(key string) []quotaBucket {
	var store any = l.store
	if !reflect.ValueOf(l.store).Comparable() {
		store = l
	}
	addr := key // an address as the limit keys its client: IPv6 by its prefix
	if a, err := netip.ParseAddr(key); err == nil {
		addr = l.formatAddr(a)
	}
	keys := []string{addr}
	if l.cfg.key != nil {
		keys = []string{key, fallbackKeyPrefix + addr}
	}
	ts := []*limiter{l}
	for _, name := range slices.Sorted(maps.Keys(l.tiers)) {
		if t := l.tiers[name]; t != nil { // an unlimited tier has no bucket
			ts = append(ts, t)
		}
	}
	var bs []quotaBucket
	for _, t := range ts {
		for _, k := range keys {
			q := Query{Policy: t.policy, Scope: t.scope(""), Key: k, Mode: Peek, Cost: 1}
			bs = append(bs, quotaBucket{bucketID{store, t.policy.text + t.ident, q.Scope, k}, q})
		}
	}
	return bs
}

// tighter reports whether a binds more than b: refused where b is admitted, or refused
// longer, or admitted with less left. Unlike the rates of one decision (Policy.report),
// the limits a quota compares may differ in their verdicts, so a refusal ranks first.
func tighter(a, b Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		return a.RetryAfter > b.RetryAfter
	}
	return a.Remaining < b.Remaining
}
