package core

import (
	"context"
	"errors"
	"fmt"
)

// A Releaser is a Store that can give a grant back: Release atomically forgets the grant an
// Enforce decision of q recorded (Decision.Grant) if still counted, once per grant.
type Releaser interface {
	Release(ctx context.Context, q Query, grant int64) error
}

// WithCountWhen counts a request only if counts(status) is true for its status: Failed for
// login protection, Succeeded for what was served. An admitted request holds its slot
// while in flight and gives it back if its status does not count; a panic, a hijack or a
// failed give-back counts. The store must implement Releaser; not with WithPenalty.
func WithCountWhen(counts func(status int) bool) Option {
	return func(c *config) error {
		c.countWhen = counts
		return require(counts != nil, "WithCountWhen(nil): pass a rule on the status, such as core.Failed")
	}
}

// Failed reports whether status is 400 or above, to count failed attempts.
func Failed(status int) bool { return status >= 400 }

// Succeeded reports whether status is below 400, to count what was served.
func Succeeded(status int) bool { return status < 400 }

// checkCountWhen refuses a limit that counts by outcome without the means to.
func (l *limiter) checkCountWhen() error {
	_, ok := l.store.(Releaser)
	switch {
	case l.cfg.countWhen == nil:
		return nil
	case l.cfg.mode == Penalty:
		return errors.New("WithCountWhen with WithPenalty: a refusal the penalty records is never given back, so the two cannot be combined; use one")
	case !ok:
		return fmt.Errorf("WithCountWhen: the store %T cannot give a grant back (see core.Releaser)", l.store)
	}
	return nil
}

// A pending grant is an admitted request's slot that its response may give back. l is the
// limit or tier that decided it; Settle's receiver is always the outer limit.
type pending struct {
	l     *limiter
	store Store // the store that recorded it: FailLocal's, after a failure
	q     Query
	grant int64
	route string
}

// hold returns the grant d recorded, for the verdict to carry to Settle, or nil when
// nothing may be given back.
func (l *limiter) hold(store Store, q Query, route string, d *Decision) any {
	if l.cfg.countWhen == nil || !d.Allowed || q.Mode != Enforce {
		return nil
	}
	return &pending{l: l, store: store, q: q, grant: d.Grant, route: route}
}

// Counts reports whether the limit counts a request answered with status (a gRPC stream
// asks it of a status it served before the end).
func (l *limiter) Counts(status int) bool {
	return l.cfg.countWhen == nil || l.cfg.countWhen(status)
}

// Settle gives back the verdict's grant if status does not count. A store error goes to
// the error hook, and the grant stays counted.
func (l *limiter) Settle(ctx context.Context, v verdict, status int) {
	p, _ := v.Release.(*pending)
	if p == nil || p.l.cfg.countWhen(status) {
		return
	}
	// The client may be gone; the slot is still the service's to give back. The memory
	// store ignores ctx, and spares the context an allocation.
	if _, mem := p.store.(*MemoryStore); !mem {
		ctx = context.WithoutCancel(ctx)
	}
	if err := p.store.(Releaser).Release(ctx, p.q, p.grant); err != nil {
		p.l.report(ctx, fmt.Errorf("reqlimit: giving back the slot of a response with status %d failed for %s %q, so it counts: %w",
			status, p.q.Policy, p.route, err), storeError)
		return
	}
	// Released follows Admitted: a grant FailLocal's store made was reported Errored.
	if p.store == p.l.store {
		p.l.observe(Released, p.q, p.route, v, 0)
	}
}
