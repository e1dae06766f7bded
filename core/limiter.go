package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// A limiter is one registered limit: its policy, its store, how a request maps to a bucket
// and what the response says. Adapters build one through hook.Core (see init) and call
// Check for every request; its exported methods are hook.Limiter's.
type limiter struct {
	policy *Policy
	store  Store
	mem    *MemoryStore // store, when it is one: decided without an interface call
	cfg    config

	// ident sets this limit's buckets apart from every other registered limit's of the
	// same policy text (see identify): "" under WithScope, whose name does it; a tier's
	// adds the tier's name (see register). The memory store gets it hashed, as the
	// policy's salt; other stores joined to the scope (see scope); Quota in its bucket IDs.
	ident string

	policyField string    // RateLimit-Policy, fixed for the limiter's life
	policyValue [1]string // the same, as the one-element value a HeaderMap holds
	rateNames   []string
	fields      fieldCache

	// The names of the limit's list members where another limit on the request took the
	// plain ones (see freeNames): altSuffix is "#login" for WithScope("login"), "#gold" for
	// tier gold, else placeSuffix.
	altNames       []string
	altPolicyField string
	altSuffix      string

	tiers map[string]*limiter // WithTiers: a limiter per tier, nil for "unlimited"

	localOnce sync.Once
	local     *MemoryStore // FailLocal's store (see localStore), found on first failure

	warned *warnings // what the limit has warned of (WithWarnings), shared with its tiers
}

type (
	input   = hook.Input[Request]
	verdict = hook.Verdict[Decision]
	// adapterLimiter is a limiter as the adapters see it (package adapter's Limiter).
	adapterLimiter = hook.Limiter[Request, Decision, *Policy]
)

// The adapters build their limits through hook.Core, which says why it is not an exported
// API of this package.
func init() {
	hook.Register(&hook.Core[Option, adapterLimiter]{
		New:  buildRate,
		Must: mustBuildRate,
		Parse: func(policy string, opts []Option) (adapterLimiter, error) {
			return build(policy, nil, opts)
		},
		Extension: withExtension,
		Refuse:    func(err error) Option { return func(*config) error { return err } },
	})
}

// buildRate builds the limit count per period with opts, for an adapter's Limit.
func buildRate(count int, period time.Duration, opts []Option) (adapterLimiter, error) {
	return build("", []Rate{{Count: count, Period: period}}, opts)
}

// mustBuildRate is buildRate where a bad argument panics instead, like
// regexp.MustCompile, naming the adapter function too.
func mustBuildRate(count int, period time.Duration, opts []Option) adapterLimiter {
	site := registration()
	l, err := newLimiter(site, "", []Rate{{Count: count, Period: period}}, opts)
	if err != nil {
		panic(fmt.Sprintf("reqlimit: %s(%d, %v) %s: %v", site.fn, count, period, site.where(), err))
	}
	return l
}

// build builds the limit of rates or, when they are nil, of a policy's text, with opts.
// Its errors end with the site where to fix what they say, and come with no limiter rather
// than a nil *limiter in the interface.
func build(policy string, rates []Rate, opts []Option) (adapterLimiter, error) {
	site := registration()
	l, err := newLimiter(site, policy, rates, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (limit registered %s)", err, site.where())
	}
	return l, nil
}

// newLimiter builds, and registers at site, the limit of rates or, when they are nil, of a
// policy's text, with opts.
func newLimiter(site registrationSite, policy string, rates []Rate, opts []Option) (*limiter, error) {
	text := rates == nil
	if text {
		p, err := parsePolicy(policy)
		if err != nil {
			return nil, err
		}
		rates = p.rates
	}
	cfg := config{ipv6Bits: 64, failStatus: http.StatusServiceUnavailable, denyStatus: 429, denyBody: "Too Many Requests\n"}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	altSuffix := placeSuffix
	if cfg.scope != "" {
		altSuffix = "#" + cfg.scope
	}
	l, err := construct(rates, text, altSuffix, cfg)
	if err == nil && cfg.tierPick != nil {
		err = l.buildTiers()
	}
	if err != nil {
		if text {
			err = fmt.Errorf("policy %q: %w", policy, err)
		}
		return nil, err
	}
	return l, l.register(site)
}

// register checks that the new limit l can be used where site registered it, and
// completes it: its identity, its tiers', its quota.
func (l *limiter) register(site registrationSite) error {
	if err := unusable(&l.cfg, site.fn); err != nil {
		return err
	}
	if l.cfg.scope == "" && len(site.stack) == 0 && l.mem == nil {
		return fmt.Errorf("%s on a store that other processes may share (not the memory store): %w", l.policy, errNoSite)
	}
	if l.cfg.scope == "" {
		l.ident = identify(site.stack)
		l.policy.salt = maphash.String(saltSeed, l.ident)
	}
	for name, t := range l.tiers {
		if t != nil {
			// Apart from the limit's buckets, its other tiers' and any other limit's of
			// the same policy: the limit's own policy and ident tell it from every other.
			t.ident = l.ident + "\x00tier " + name + "\x00of " + l.policy.text
			t.policy.salt = maphash.String(saltSeed, t.ident)
			t.warned = l.warned // a limit warns once, whichever tier saw it
		}
	}
	if l.cfg.quota != nil {
		l.cfg.quota.register(l, strings.Join(site.stack, "\n"), l.cfg.extensions[hook.BatchKey{}])
	}
	return nil
}

// construct makes a limiter of rates (and cfg's extra rates) with cfg; text says rates
// were read from a policy's text, altSuffix ends its altNames.
func construct(rates []Rate, text bool, altSuffix string, cfg config) (*limiter, error) {
	l := &limiter{cfg: cfg}
	p, err := NewPolicy(append(append([]Rate(nil), rates...), l.cfg.extraRates...)...)
	if err == nil && !l.cfg.shortPeriods {
		fromText := 0
		if text {
			fromText = len(rates)
		}
		err = p.checkFloor(fromText)
	}
	if err != nil {
		return nil, err
	}
	if l.cfg.quota != nil && l.cfg.scope == "" {
		return nil, errors.New("WithQuota needs WithScope(name): a quota reaches buckets by a name every instance shares")
	}
	l.policy = p
	l.store = l.cfg.store
	if l.store == nil {
		l.store = theDefaultStore()
	}
	l.mem, _ = l.store.(*MemoryStore)
	l.warned = newWarnings(&l.cfg)
	if err := l.checkCountWhen(); err != nil {
		return nil, err
	}
	l.rateNames, l.policyField = l.names("")
	l.policyValue[0] = l.policyField
	l.altSuffix = altSuffix
	l.altNames, l.altPolicyField = l.names(altSuffix)
	l.fields = newFieldCache(p)
	return l, nil
}

// names names the limit's rates in its RateLimit and RateLimit-Policy list members, each
// rate's text then suffix, and returns the RateLimit-Policy members they make.
func (l *limiter) names(suffix string) (names []string, policyField string) {
	names = make([]string, len(l.policy.rates))
	for i, r := range l.policy.rates {
		names[i] = sfName(r.String() + suffix)
	}
	return names, formatPolicy(names, l.policy.rates, "")
}

// Policy returns the limiter's policy.
func (l *limiter) Policy() *Policy { return l.policy }

// Extension returns the adapter-specific setting stored under key, or nil.
func (l *limiter) Extension(key any) any { return l.cfg.extensions[key] }

// NeedsRequest reports whether Check reads more of its input's Request than header fields
// and context: a key, skip, cost or tier function sees it.
func (l *limiter) NeedsRequest() bool {
	c := &l.cfg
	return c.key != nil || c.skip != nil || c.cost != nil || c.tierPick != nil
}

// FrameworkIP reports whether WithClientIPFromFramework was given.
func (l *limiter) FrameworkIP() bool { return l.cfg.frameworkIP }

// Check decides one request. It never fails: store errors go to the error hook and the
// fail mode decides.
func (l *limiter) Check(ctx context.Context, in input, h hook.HeaderSetter) (v verdict) {
	t := l
	if l.tiers != nil && in.Request != nil {
		// A tier not in WithTiers gets the limit's own policy; "unlimited" is nil.
		tier, ok := l.tiers[l.cfg.tierPick(in.Request)]
		if ok && tier == nil {
			v.Allowed, v.Skipped = true, true
			return v
		}
		if ok {
			t = tier
		}
	}
	key := t.check(ctx, &in, &v)
	if h != nil {
		t.setHeaders(h, &v, key)
	}
	return v
}

// check decides in into *v, which is zero, and returns the key it decided for.
func (l *limiter) check(ctx context.Context, in *input, v *verdict) (key string) {
	c := &l.cfg
	if c.skip != nil && in.Request != nil && c.skip(in.Request) || len(c.allow) > 0 && l.exempt(in.Peer, in.Request) {
		v.Allowed, v.Skipped = true, true
		return ""
	}
	q := Query{Policy: l.policy, Scope: l.scope(in.Route), Key: l.key(ctx, in), Mode: c.mode, Cost: 1}
	if c.cost != nil && in.Request != nil {
		// Below 1 counts as 1 (Query.Cost), said here too: a store that took a negative
		// cost for a refund would let a cost function turn the limit off.
		q.Cost = max(1, c.cost(in.Request))
		// Refused before the store is asked, whatever the fail mode (FailOpen or FailLocal
		// would admit it uncounted when the store fails).
		if err := l.policy.checkCost(q.Cost); err != nil {
			*v = l.tooCostly(requestContext(ctx, in), q, in.Route, err)
			return q.Key
		}
	}
	var err error
	var took time.Duration
	if l.mem != nil {
		err = l.mem.decide(&v.Decision, &q, l.mem.now())
	} else {
		// Only a store across a network is timed (Event.StoreTime): two clock reads would
		// add to every in-memory decision.
		ctx = requestContext(ctx, in)
		start := time.Now()
		v.Decision, err = l.store.Decide(ctx, q)
		took = time.Since(start)
	}
	if err != nil {
		ctx = requestContext(ctx, in)
		if errors.Is(err, ErrCostTooHigh) {
			*v = l.tooCostly(ctx, q, in.Route, err)
		} else {
			*v = l.failed(ctx, q, in.Route, err, took)
		}
		return q.Key
	}
	v.Allowed, v.Status = v.Decision.Allowed || c.dryRun, c.denyStatus
	if c.countWhen != nil { // as hold says, without the call
		v.Release = l.hold(l.store, q, in.Route, &v.Decision)
	}
	if c.observer != nil {
		o := Admitted
		if !v.Decision.Allowed {
			o = Refused
		}
		l.observe(o, q, in.Route, *v, took)
	}
	return q.Key
}

// requestContext returns ctx or, when the adapter passed none, the request's context:
// adapters whose framework builds its context on demand leave it to the paths that need it.
func requestContext(ctx context.Context, in *input) context.Context {
	switch {
	case ctx != nil:
		return ctx
	case in.Request != nil:
		return in.Request.Context()
	}
	return context.Background()
}

// observe tells the observer, if any, of a decision.
func (l *limiter) observe(o Outcome, q Query, route string, v verdict, took time.Duration) {
	if l.cfg.observer != nil {
		l.cfg.observer(Event{Outcome: o, Scope: cmp.Or(l.cfg.scope, route), Key: q.Key, Policy: l.policy,
			Decision: v.Decision, Err: v.Err, DryRun: l.cfg.dryRun, StoreTime: took})
	}
}

// scope names a request's bucket scope: WithScope's name, else the route ("" if unknown:
// one for all), then ident, except in the memory store, which has it in the policy's salt
// and so joins no strings.
func (l *limiter) scope(route string) string {
	if l.cfg.scope != "" {
		route = l.cfg.scope
	}
	if l.ident == "" || l.mem != nil {
		return route
	}
	return route + l.ident
}

// fallbackKeyPrefix keeps IP keys of a custom-keyed limit apart from key values: no HTTP
// header can carry a NUL byte.
const fallbackKeyPrefix = "\x00ip "

// key names the client. A key function's error is reported (it is a bug or an outage in
// the application's code) and the request falls back to the client's IP, so a failing
// key function never turns limiting off.
func (l *limiter) key(ctx context.Context, in *input) string {
	if l.cfg.key == nil || in.Request == nil {
		return l.clientKey(ctx, in)
	}
	k, err := l.cfg.key(in.Request)
	if err == nil && k != "" {
		return k // the client's IP is not needed, nor worked out
	}
	if err != nil {
		l.report(requestContext(ctx, in), fmt.Errorf("reqlimit: key function failed for %s %q, keyed by client IP instead: %w", l.policy, in.Route, err), requestError)
	}
	return fallbackKeyPrefix + l.clientKey(ctx, in)
}

// tooCostly refuses a request whose cost exceeds the limit, whatever the fail mode: it could
// never be admitted, and admitting it uncounted would break the limit. Waiting cannot help,
// so it is 413 without Retry-After, not a 429 inviting a retry. The error hook is told: a
// cost above the count is a bug, or a request the application should have refused itself.
func (l *limiter) tooCostly(ctx context.Context, q Query, route string, err error) verdict {
	err = fmt.Errorf("reqlimit: cost %d refused for %s %q: %w", q.Cost, q.Policy, route, err)
	l.report(ctx, err, requestError)
	// The rate the cost exceeds, for a deny handler or an observer: not the first rate,
	// which the cost may fit.
	v := verdict{Allowed: l.cfg.dryRun, Status: http.StatusRequestEntityTooLarge, Err: err,
		Decision: Decision{Rate: q.Policy.narrowest()}}
	l.observe(Errored, q, route, v, 0)
	return v
}

// Kinds of error report logs apart.
const (
	storeError   = iota // the store failed: an outage, or a bug in a store
	requestError        // a request's key, cost or own deadline: which a client can cause at will
)

// lastLog holds, for each kind of error, the second of the last one logged without an
// error hook: one for the process, so that an outage seen by every route's limit logs a
// line a second, not one per limit; one for each kind, so that requests a client makes
// fail on purpose cannot take the line an outage needs.
var lastLog [2]atomic.Int64

// report hands err to the error hook, or logs it at most once a second for its kind.
func (l *limiter) report(ctx context.Context, err error, kind int) {
	if l.cfg.onError != nil {
		l.cfg.onError(ctx, err)
	} else if now := time.Now().Unix(); lastLog[kind].Swap(now) != now {
		if kind == storeError {
			mode := [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}[l.cfg.failMode]
			slog.WarnContext(ctx, "rate limit", "err", err, "fail_mode", mode)
		} else { // the fail mode did not decide it: naming one would read as an outage
			slog.WarnContext(ctx, "rate limit", "err", err)
		}
	}
}

// failed applies the fail mode to a store error. A request whose own context ended first
// (its client hung up, or its deadline passed) is refused as under FailClosed whatever the
// mode: the store did not fail, and admitting it uncounted would let any client skip the
// limit by hanging up. A hang-up is not reported: it is neither a bug nor an outage.
func (l *limiter) failed(ctx context.Context, q Query, route string, err error, took time.Duration) verdict {
	c := &l.cfg
	gone, kind := ended(ctx), storeError
	if gone {
		// The request's own deadline, which a client can choose (gRPC's grpc-timeout): it
		// is logged apart from the store's failures, so that it cannot keep them out.
		err, kind = fmt.Errorf("reqlimit: request ended before the store decided for %s %q: %w", q.Policy, route, err), requestError
	} else {
		err = fmt.Errorf("reqlimit: store failed for %s %q: %w", q.Policy, route, err)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		l.report(ctx, err, kind)
	}
	v := verdict{Allowed: true, Err: err}
	switch {
	case gone || c.failMode == FailClosed:
		// Undecided, it reports the first rate, and (for headers) a retry in a second.
		v.Allowed, v.Status, v.Undecided = c.dryRun, c.failStatus, true
		v.Decision = Decision{Rate: q.Policy.rates[0], RetryAfter: time.Second}
	case c.failMode == FailLocal:
		l.localOnce.Do(func() { l.local = localStore(c.scope) })
		if d, lerr := l.local.Decide(ctx, q); lerr == nil {
			v.Decision, v.Allowed, v.Status = d, d.Allowed || c.dryRun, c.denyStatus
			v.Release = l.hold(l.local, q, route, &d)
		}
	}
	l.observe(Errored, q, route, v, took)
	return v
}

// scopedLocals are FailLocal's stand-ins for limits named with WithScope, one per name, so
// that limits sharing a quota share it in the stand-in too, whatever store failed.
var scopedLocals sync.Map // scope name → *MemoryStore

// localStore returns the memory store where FailLocal decides while a limit's store is
// down. A limit without a scope name has a stand-in of its own, which goes with it (a test
// that registers the limit again starts empty).
func localStore(scope string) *MemoryStore {
	if scope == "" {
		return NewMemoryStore(nil)
	}
	s, _ := scopedLocals.LoadOrStore(scope, NewMemoryStore(nil))
	return s.(*MemoryStore)
}

// ended reports whether ctx has ended, or its deadline has passed: a store given the
// deadline (the Redis store's own timer, a child context made after it) fails on it before
// the context's timer has cancelled ctx, and a client that picks its deadline (gRPC's
// grpc-timeout) must not be admitted uncounted by FailOpen in that gap.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// DenyBody returns the plain-text body of a refusal with status whose verdict carried err.
// A store failure refused with WithFailStatus's own status says that status, or that the
// limit could not decide if the status has no text (the deny body would read as the client
// having sent too much); FailLocal's refusal over the limit gets the deny body.
func (l *limiter) DenyBody(status int, err error) string {
	switch {
	case err == nil:
	case errors.Is(err, ErrCostTooHigh):
		return "Request Cost Exceeds The Limit\n"
	case status == l.cfg.failStatus && status != l.cfg.denyStatus:
		if text := http.StatusText(status); text != "" {
			return text + "\n"
		}
		return "Rate Limit Unavailable\n"
	}
	return l.cfg.denyBody
}
