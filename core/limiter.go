package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Limiter is one registered limit as the middlewares apply it: its policy, its store, how
// a request maps to a bucket and what the response says. Adapters build one when a route
// is registered and call Check for every request; applications normally never touch it.
type Limiter struct {
	policy *Policy
	store  Store
	mem    *MemoryStore // store, when it is one: decided without an interface call
	cfg    config

	// ident tells this limit's buckets apart from those of another registered limit with
	// the same policy (see identify): "" for the first such limit and under WithScope.
	ident  string
	scopes scopeCache

	policyField string    // RateLimit-Policy, fixed for the limiter's life
	policyValue [1]string // the same, as the one-element value a HeaderMap holds
	rateNames   []string
	fields      fieldCache

	localOnce sync.Once
	local     *MemoryStore // FailLocal's store, made on first failure
	lastLog   atomic.Int64
}

// NewLimiter builds the limit "count per period" (plus any WithRate) with opts. The error
// names the bad value and where the limit was registered; adapters' Limit functions panic
// with it, their New functions return it.
func NewLimiter(count int, period time.Duration, opts ...Option) (*Limiter, error) {
	site := registration()
	l, err := newLimiter([]Rate{{Count: count, Period: period}}, opts, site)
	if err != nil {
		return nil, site.wrap(err)
	}
	return l, nil
}

// ParseLimiter builds a limit from a policy's text form ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration files and environment variables.
func ParseLimiter(policy string, opts ...Option) (*Limiter, error) {
	site := registration()
	p, err := parsePolicy(policy)
	if err != nil {
		return nil, site.wrap(err) // it names the policy already
	}
	l, err := newLimiter(p.rates, opts, site)
	if err != nil {
		return nil, site.wrap(fmt.Errorf("policy %q: %w", policy, err))
	}
	return l, nil
}

// MustLimiter is NewLimiter for the adapters' Limit functions: it panics, like
// regexp.MustCompile, with a message naming the bad value and where the limit was
// registered (file:line and, when the source is at hand, the registering line itself,
// which names the route). fn names the adapter function, such as "ginlimit.Limit".
func MustLimiter(fn string, count int, period time.Duration, opts ...Option) *Limiter {
	site := registration()
	l, err := newLimiter([]Rate{{Count: count, Period: period}}, opts, site)
	if err != nil {
		panic(fmt.Sprintf("reqlimit: %s(%d, %v) %s: %v", fn, count, period, site.where(), err))
	}
	return l
}

func newLimiter(rates []Rate, opts []Option, site registrationSite) (*Limiter, error) {
	l := &Limiter{cfg: config{ipv6Bits: 64, failStatus: 429, denyStatus: 429, denyBody: "Too Many Requests\n"}}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&l.cfg); err != nil {
			return nil, err
		}
	}
	p, err := NewPolicy(append(append([]Rate(nil), rates...), l.cfg.extraRates...)...)
	if err == nil && !l.cfg.shortPeriods {
		err = p.checkFloor()
	}
	if err != nil {
		return nil, err
	}
	l.policy = p
	l.store = l.cfg.store
	if l.store == nil {
		l.store = DefaultStore()
	}
	l.mem, _ = l.store.(*MemoryStore)
	if l.cfg.scope == "" {
		l.ident = identify(p.text, site.stack)
	}
	l.rateNames = make([]string, len(p.rates))
	items := make([]string, len(p.rates))
	for i, r := range p.rates {
		l.rateNames[i] = r.String()
		items[i] = policyItem(l.rateNames[i], r)
	}
	l.policyField = strings.Join(items, ", ")
	l.policyValue[0] = l.policyField
	l.fields = newFieldCache(p)
	return l, nil
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() *Policy { return l.policy }

// Extension returns the adapter-specific setting stored under key by WithExtension, or nil.
func (l *Limiter) Extension(key any) any { return l.cfg.extensions[key] }

// NeedsRequest reports whether Check will read its Request argument (key, skip or cost
// functions, trusted proxies). Adapters whose Request implementation allocates build one
// only then.
func (l *Limiter) NeedsRequest() bool {
	c := &l.cfg
	return c.key != nil || c.skip != nil || c.cost != nil || len(c.trusted) > 0
}

// TrustsFrameworkIP reports whether WithClientIPFromFramework was given.
func (l *Limiter) TrustsFrameworkIP() bool { return l.cfg.frameworkIP }

// An Input is what an adapter knows of a request.
type Input struct {
	// Route is the matched route pattern, "" when the adapter does not know it (no route
	// matched, or the middleware runs before routing). All requests with an unknown route
	// share one bucket per client: never one per path, which a client could vary at will.
	Route string
	// Peer is the connection's peer address ("host:port"), or the framework's client IP
	// when the application configured its framework's trusted proxies.
	Peer string
	// Request gives key, skip and cost functions the request; it may be nil when
	// NeedsRequest is false.
	Request Request
}

// A Verdict is Check's answer.
type Verdict struct {
	// Decision is the store's decision (zero when skipped or when the store failed open).
	Decision Decision
	// Allow reports whether the request goes on to the handler.
	Allow bool
	// Status is the response status when Allow is false.
	Status int
	// Skipped reports that a skip rule exempted the request: send no rate-limit fields.
	Skipped bool
	// Err is the store's error, if it failed, or the reason the request can never be
	// admitted (ErrCostTooHigh).
	Err error
}

// Check decides one request. It never fails: store errors go to the error hook and the
// fail mode decides.
func (l *Limiter) Check(ctx context.Context, in Input) (v Verdict) {
	c := &l.cfg
	if c.skip != nil && in.Request != nil && c.skip(in.Request) {
		return Verdict{Allow: true, Skipped: true}
	}
	q := Query{Policy: l.policy, Scope: l.scope(in.Route), Mode: c.mode, Cost: 1}
	q.Key = l.key(ctx, in)
	if c.cost != nil && in.Request != nil {
		q.Cost = c.cost(in.Request)
	}
	// The decision is written straight into the verdict: copying it out of each frame on
	// the way was a measurable part of a request's cost.
	var err error
	if l.mem != nil {
		err = l.mem.decide(&v.Decision, q, l.mem.now())
	} else {
		v.Decision, err = l.store.Decide(ctx, q)
	}
	if errors.Is(err, ErrCostTooHigh) {
		return l.tooCostly(ctx, q, in.Route, err)
	}
	if err != nil {
		return l.failed(ctx, q, in.Route, err)
	}
	v.Allow, v.Status = v.Decision.Allowed || c.dryRun, c.denyStatus
	if c.observer != nil {
		o := Admitted
		if !v.Decision.Allowed {
			o = Refused
		}
		l.observe(o, q, in.Route, v)
	}
	return v
}

// observe tells the observer, if any, of a decision.
func (l *Limiter) observe(o Outcome, q Query, route string, v Verdict) {
	if l.cfg.observer != nil {
		scope := l.cfg.scope
		if scope == "" {
			scope = route
		}
		l.cfg.observer(Event{Outcome: o, Route: scope, Key: q.Key, Decision: v.Decision, Err: v.Err, DryRun: l.cfg.dryRun})
	}
}

// undecided is what a refusal without a decision reports: the first rate's limit, and
// (for headers) a retry of one second.
func undecided(p *Policy) Decision {
	return Decision{Limit: p.rates[0].Count, Window: p.rates[0].Period, RetryAfter: time.Second}
}

// scope names the bucket's scope for a request on route: the explicit scope, or the route
// set apart from other limits' (ident). An unknown route is "": one scope for all of them.
func (l *Limiter) scope(route string) string {
	switch {
	case l.cfg.scope != "":
		return l.cfg.scope
	case l.ident == "":
		return route
	}
	return l.scopes.get(route, l.ident)
}

// A scopeCache keeps the scopes of a limit whose buckets carry an ident, so that joining
// route and ident allocates once per route rather than once per request. Direct-mapped:
// a limit sees few routes, and a collision only costs the allocation again.
type scopeCache struct {
	slots [64]atomic.Pointer[[2]string] // route, scope
}

func (c *scopeCache) get(route, ident string) string {
	slot := &c.slots[(len(route)*31+int(lastByte(route)))%len(c.slots)]
	if e := slot.Load(); e != nil && e[0] == route {
		return e[1]
	}
	e := &[2]string{strings.Clone(route), route + ident}
	slot.Store(e)
	return e[1]
}

func lastByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[len(s)-1]
}

// fallbackKeyPrefix keeps IP keys of a custom-keyed limit apart from key values: no HTTP
// header can carry a NUL byte.
const fallbackKeyPrefix = "\x00ip "

// key names the client. A key function's error is reported (it is a bug or an outage in
// the application's code) and the request falls back to the client's IP, so a failing
// key function never turns limiting off.
func (l *Limiter) key(ctx context.Context, in Input) string {
	if l.cfg.key == nil || in.Request == nil {
		return l.ClientKey(in.Peer, in.Request)
	}
	k, err := l.cfg.key(in.Request)
	if err == nil && k != "" {
		return k // the client's IP is not needed, nor worked out
	}
	if err != nil {
		l.report(ctx, fmt.Errorf("reqlimit: key function failed for %s %q, keyed by client IP instead: %w", l.policy, in.Route, err))
	}
	return fallbackKeyPrefix + l.ClientKey(in.Peer, in.Request)
}

// tooCostly refuses a request whose cost exceeds the limit, whatever the fail mode: it
// could never be admitted, and admitting it uncounted would break the limit. Waiting
// cannot help, so the refusal is 413 without Retry-After rather than a 429 inviting a
// retry. The error hook is told, since a cost function that returns more than the count
// is a bug or a request the application should have refused itself.
func (l *Limiter) tooCostly(ctx context.Context, q Query, route string, err error) Verdict {
	err = fmt.Errorf("reqlimit: cost %d refused for %s %q: %w", q.Cost, q.Policy, route, err)
	l.report(ctx, err)
	r := q.Policy.rates[0]
	v := Verdict{Allow: l.cfg.dryRun, Status: http.StatusRequestEntityTooLarge, Err: err,
		Decision: Decision{Limit: r.Count, Window: r.Period}}
	l.observe(Errored, q, route, v)
	return v
}

// report hands err to the error hook, or logs it at most once a second.
func (l *Limiter) report(ctx context.Context, err error) {
	if l.cfg.onError != nil {
		l.cfg.onError(ctx, err)
	} else if now := time.Now().Unix(); l.lastLog.Swap(now) != now {
		slog.WarnContext(ctx, "rate limit", "err", err, "fail_mode", l.cfg.failMode.String())
	}
}

// failed applies the fail mode to a store error.
func (l *Limiter) failed(ctx context.Context, q Query, route string, err error) Verdict {
	c := &l.cfg
	err = fmt.Errorf("reqlimit: store failed for %s %q: %w", q.Policy, route, err)
	l.report(ctx, err)
	v := Verdict{Allow: true, Err: err}
	switch c.failMode {
	case FailClosed:
		v.Allow, v.Status, v.Decision = c.dryRun, c.failStatus, undecided(q.Policy)
	case FailLocal:
		l.localOnce.Do(func() { l.local = NewMemoryStore() })
		if d, lerr := l.local.Decide(ctx, q); lerr == nil {
			v.Decision, v.Allow, v.Status = d, d.Allowed || c.dryRun, c.denyStatus
		}
	}
	l.observe(Errored, q, route, v)
	return v
}

// String names the fail mode.
func (m FailMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return "failmode(" + itoa(int(m)) + ")"
}

// DenyBody returns the plain-text body of the refusal v.
func (l *Limiter) DenyBody(v *Verdict) string {
	if v.Status == http.StatusRequestEntityTooLarge && errors.Is(v.Err, ErrCostTooHigh) {
		return "Request Cost Exceeds The Limit\n"
	}
	return l.cfg.denyBody
}

// neverAdmitted reports whether v refuses a request that waiting cannot help.
func (v *Verdict) neverAdmitted() bool { return v.Err != nil && errors.Is(v.Err, ErrCostTooHigh) }

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
