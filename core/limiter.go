package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime"
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

	policyField string    // RateLimit-Policy, fixed for the limiter's life
	policyValue [1]string // the same, as the one-element value a HeaderMap holds
	rateNames   []string
	fields      fieldCache

	localOnce sync.Once
	local     *MemoryStore // FailLocal's store, made on first failure
	lastLog   atomic.Int64
}

// NewLimiter builds the limit "count per period" (plus any WithRate) with opts. The error
// names the bad value; adapters' Limit functions panic with it, their New functions return it.
func NewLimiter(count int, period time.Duration, opts ...Option) (*Limiter, error) {
	return newLimiter([]Rate{{Count: count, Period: period}}, opts)
}

// ParseLimiter builds a limit from a policy's text form ("3/1m", "500/2s,2000/10s"), for
// limits read from configuration files and environment variables.
func ParseLimiter(policy string, opts ...Option) (*Limiter, error) {
	p, err := ParsePolicy(policy)
	if err != nil {
		return nil, err
	}
	return newLimiter(p.rates, opts)
}

// MustLimiter is NewLimiter for the adapters' Limit functions: it panics, like
// regexp.MustCompile, with a message naming the bad value and where the limit was
// registered (file:line and, when the source is at hand, the registering line itself,
// which names the route). fn names the adapter function, such as "ginlimit.Limit".
func MustLimiter(fn string, count int, period time.Duration, opts ...Option) *Limiter {
	l, err := NewLimiter(count, period, opts...)
	if err != nil {
		panic(fmt.Sprintf("reqlimit: %s(%d, %v) %s: %v", fn, count, period, registrationSite(), err))
	}
	return l
}

func newLimiter(rates []Rate, opts []Option) (*Limiter, error) {
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
	if err != nil {
		return nil, err
	}
	l.policy = p
	l.store = l.cfg.store
	if l.store == nil {
		l.store = DefaultStore()
	}
	l.mem, _ = l.store.(*MemoryStore)
	l.rateNames = make([]string, len(p.rates))
	items := make([]string, len(p.rates))
	for i, r := range p.rates {
		l.rateNames[i] = r.String()
		items[i] = fmt.Sprintf("%q;q=%d;w=%d", l.rateNames[i], r.Count, ceilSeconds(r.Period))
	}
	l.policyField = strings.Join(items, ", ")
	l.policyValue[0] = l.policyField
	l.fields = newFieldCache(p)
	return l, nil
}

// registrationSite describes the first caller outside reqlimit's own packages.
func registrationSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !isOwnFrame(f.Function) {
			site := fmt.Sprintf("at %s:%d", path.Base(f.File), f.Line)
			if line := sourceLine(f.File, f.Line); line != "" {
				site += " (" + line + ")"
			}
			return site
		}
		if !more {
			return "at an unknown site"
		}
	}
}

func isOwnFrame(fn string) bool {
	const mod = "github.com/reqlimit/reqlimit/"
	if !strings.HasPrefix(fn, mod) {
		return false
	}
	pkg := strings.TrimPrefix(fn, mod)
	for _, own := range []string{"core.", "ginlimit.", "echolimit.", "fiberlimit.", "nethttp."} {
		if strings.HasPrefix(pkg, own) {
			return true
		}
	}
	return false
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
	// Route is the matched route pattern, "" when none matched.
	Route string
	// Path is the request path, the bucket's scope when no route matched.
	Path string
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
	// Err is the store's error, if it failed.
	Err error
}

// Check decides one request. It never fails: store errors go to the error hook and the
// fail mode decides.
func (l *Limiter) Check(ctx context.Context, in Input) (v Verdict) {
	c := &l.cfg
	if c.skip != nil && in.Request != nil && c.skip(in.Request) {
		return Verdict{Allow: true, Skipped: true}
	}
	q := Query{Policy: l.policy, Scope: l.scope(in), Mode: c.mode, Cost: 1}
	q.Key = l.key(in)
	if c.cost != nil && in.Request != nil {
		q.Cost = c.cost(in.Request)
	}
	// The decision is written straight into the verdict: copying it out of each frame on
	// the way was a measurable part of a request's cost (see docs/performance.md).
	var err error
	if l.mem != nil {
		err = l.mem.decide(&v.Decision, q, l.mem.now())
	} else {
		v.Decision, err = l.store.Decide(ctx, q)
	}
	if errors.Is(err, ErrCostTooHigh) {
		return l.tooCostly(ctx, q, err)
	}
	if err != nil {
		return l.failed(ctx, q, err)
	}
	v.Allow, v.Status = v.Decision.Allowed || c.dryRun, c.denyStatus
	if c.observer != nil {
		o := Admitted
		if !v.Decision.Allowed {
			o = Refused
		}
		l.observe(o, q, v)
	}
	return v
}

// observe tells the observer, if any, of a decision.
func (l *Limiter) observe(o Outcome, q Query, v Verdict) {
	if l.cfg.observer != nil {
		l.cfg.observer(Event{Outcome: o, Route: q.Scope, Key: q.Key, Decision: v.Decision, Err: v.Err, DryRun: l.cfg.dryRun})
	}
}

// undecided is what a refusal without a decision reports: the first rate's limit, and
// (for headers) a retry of one second.
func undecided(p *Policy) Decision {
	return Decision{Limit: p.rates[0].Count, Window: p.rates[0].Period, RetryAfter: time.Second}
}

func (l *Limiter) scope(in Input) string {
	switch {
	case l.cfg.scope != "":
		return l.cfg.scope
	case in.Route != "":
		return in.Route
	}
	return cleanPath(in.Path)
}

// cleanPath keeps unmatched paths from minting buckets by spelling ("/a/../b", "//b").
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if c := path.Clean(p); c != p {
		if !strings.HasPrefix(c, "/") {
			c = "/" + c
		}
		return c
	}
	return p
}

// fallbackKeyPrefix keeps IP keys of a custom-keyed limit apart from key values: no HTTP
// header can carry a NUL byte.
const fallbackKeyPrefix = "\x00ip "

func (l *Limiter) key(in Input) string {
	if l.cfg.key == nil || in.Request == nil {
		return l.ClientKey(in.Peer, in.Request)
	}
	if k, err := l.cfg.key(in.Request); err == nil && k != "" {
		return k // the client's IP is not needed, nor worked out
	}
	return fallbackKeyPrefix + l.ClientKey(in.Peer, in.Request)
}

// tooCostly refuses a request whose cost exceeds the limit, whatever the fail mode: it
// could never be admitted, and admitting it uncounted would break the limit. The error
// hook is told, since a cost function that returns more than the count is a bug.
func (l *Limiter) tooCostly(ctx context.Context, q Query, err error) Verdict {
	c := &l.cfg
	err = fmt.Errorf("reqlimit: cost %d refused for %s %q: %w", q.Cost, q.Policy, q.Scope, err)
	l.report(ctx, err)
	v := Verdict{Allow: c.dryRun, Status: c.denyStatus, Err: err, Decision: undecided(q.Policy)}
	l.observe(Errored, q, v)
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
func (l *Limiter) failed(ctx context.Context, q Query, err error) Verdict {
	c := &l.cfg
	err = fmt.Errorf("reqlimit: store failed for %s %q: %w", q.Policy, q.Scope, err)
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
	l.observe(Errored, q, v)
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

// DenyBody returns the plain-text body of a refusal.
func (l *Limiter) DenyBody() string { return l.cfg.denyBody }

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
