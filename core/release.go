package core

import (
	"context"
	"errors"
	"fmt"
)

// A Releaser is a Store that can give a grant back: Release atomically forgets the grant an
// Enforce decision of q recorded (Decision.Grant) if still counted. Once per grant: a
// bucket can hold several.
type Releaser interface {
	Release(ctx context.Context, q Query, grant int64) error
}

// WithCountWhen counts a request only if counts(status) is true for its status: Failed for
// login protection, Succeeded for what was served. An admitted request holds its slot
// while in flight and gives it back if its status does not count; a panic, a hijack or a
// failed give-back counts. The store must implement Releaser; not with WithPenalty.
func WithCountWhen(counts func(status int) bool) Option {
	return func(c *config) error {
		if counts == nil {
			return errors.New("WithCountWhen(nil): pass a rule on the status, such as core.Failed")
		}
		c.countWhen = counts
		return nil
	}
}

// Failed reports whether status is 400 or above, to count failed attempts.
func Failed(status int) bool { return status >= 400 }

// Succeeded reports whether status is below 400, to count what was served.
func Succeeded(status int) bool { return status < 400 }

// checkCountWhen refuses a limit that counts by outcome without the means to.
func (l *limiter) checkCountWhen() error {
	if l.cfg.countWhen == nil {
		return nil
	}
	if l.cfg.mode == Penalty {
		return errors.New("WithCountWhen with WithPenalty: a refusal the penalty records is never given back, so the two cannot be combined; use one")
	}
	if _, ok := l.store.(Releaser); !ok {
		return fmt.Errorf("WithCountWhen: the store %T cannot give a grant back (see core.Releaser)", l.store)
	}
	return nil
}

// A pending grant is an admitted request's slot that its response may give back.
type pending struct {
	l     *limiter
	store Store // the store that recorded it: FailLocal's, after a failure
	q     Query
	grant int64
	route string
}

// hold returns the grant the decision d of q in store recorded, for the verdict to carry
// to Settle, or nil when nothing may be given back.
func (l *limiter) hold(store Store, q Query, route string, d *Decision) any {
	if l.cfg.countWhen == nil || !d.Allowed || q.Mode != Enforce {
		return nil
	}
	return &pending{l: l, store: store, q: q, grant: d.Grant, route: route}
}

// Counts reports whether the limit's rule counts a request answered with status; without
// WithCountWhen every request counts. An adapter whose request can be served before its
// status is known (a gRPC stream that has sent messages) asks it of the served status.
func (l *limiter) Counts(status int) bool {
	return l.cfg.countWhen == nil || l.cfg.countWhen(status)
}

// Settle finishes a request whose verdict carried a grant that may be given back: the
// response's status decides whether it counts. It never fails: a store error goes to the
// error hook, and the grant stays counted.
func (l *limiter) Settle(ctx context.Context, v verdict, status int) {
	p, _ := v.Release.(*pending)
	if p == nil || p.l.cfg.countWhen(status) {
		return
	}
	// The client may be gone once its response is written; the slot is still the
	// service's to give back, within the store's own time limit. The memory store
	// ignores ctx, and spares the context an allocation.
	if _, mem := p.store.(*MemoryStore); !mem {
		ctx = context.WithoutCancel(ctx)
	}
	if err := p.store.(Releaser).Release(ctx, p.q, p.grant); err != nil {
		p.l.report(ctx, fmt.Errorf("reqlimit: giving back the slot of a response with status %d failed for %s %q, so it counts: %w",
			status, p.q.Policy, p.route, err), storeError)
		return
	}
	// Released follows Admitted: a grant FailLocal's store made was reported Errored, and
	// a release of it would make observers' admitted less released go below what was kept.
	if p.store == p.l.store {
		p.l.observe(Released, p.q, p.route, v, 0)
	}
}
