// Package adapter is what reqlimit's adapters share: a limit built from core's options,
// applied to one request at a time. An adapter turns its framework's request into an
// Input, calls Check, which also sets the response's rate-limit fields, and when the request
// is refused answers with DenyBody or the application's deny handler.
package adapter

import (
	"context"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// Input is what an adapter knows of a request.
type Input = hook.Input[core.Request]

// Verdict is a limit's answer for one request.
type Verdict = hook.Verdict[core.Decision]

// HeaderSetter and HeaderMap: see package hook.
type (
	HeaderSetter = hook.HeaderSetter
	HeaderMap    = hook.HeaderMap
)

// Response field names.
const (
	HeaderRateLimitPolicy = hook.HeaderRateLimitPolicy
	HeaderRateLimit       = hook.HeaderRateLimit
	HeaderRetryAfter      = hook.HeaderRetryAfter
	HeaderLimit           = hook.HeaderLimit
	HeaderRemaining       = hook.HeaderRemaining
	HeaderReset           = hook.HeaderReset
)

// A Limiter is one registered limit. Adapters build one when a route is registered.
type Limiter interface {
	// Check decides one request and, when h is not nil, writes its rate-limit fields in
	// the configured style into h: a refusal also gets Retry-After, unless waiting cannot
	// help. It never fails: store errors go to the error hook and the fail mode decides.
	// ctx may be nil when r is set: the request's context is then read only where it is
	// needed (a store across a network, an error to report).
	Check(ctx context.Context, in Input, h HeaderSetter) Verdict
	// Settle finishes an admitted request whose Verdict carries a Release, once its
	// handler has answered with status: the limit's rule decides whether it counts. A
	// request whose status cannot be known (its handler panicked, its connection was
	// taken over) is not settled, and counts.
	Settle(ctx context.Context, v Verdict, status int)
	// Counts reports whether the limit's rule (core.WithCountWhen) counts a request
	// answered with status; without a rule every request counts.
	Counts(status int) bool
	// DenyBody returns the plain-text body of a refusal answered with status whose
	// Verdict carried err.
	DenyBody(status int, err error) string
	// Extension returns the adapter's setting stored under key by Option, or nil.
	Extension(key any) any
	// NeedsRequest reports whether Check reads Input.Request (key, skip or cost functions,
	// trusted proxies): adapters whose Request allocates build one only then.
	NeedsRequest() bool
	// FrameworkIP reports whether core.WithClientIPFromFramework was given.
	FrameworkIP() bool
	// Policy returns the limit's policy.
	Policy() *core.Policy
	// WarnUnrouted tells the limit of a request it decided with no route that the router
	// then routed to pattern: it runs before routing, and every route shares one bucket.
	// The limit warns once (core.WithWarnings), with fix, how the adapter's users give it
	// the route.
	WarnUnrouted(ctx context.Context, pattern, fix string)
}

// Must builds the limit "count per period" with opts, for an adapter's Limit: bad
// arguments panic, naming the value and the application's line that registered the limit.
func Must(count int, period time.Duration, opts ...core.Option) Limiter {
	return hook.MustBuild(count, period, opts).(Limiter)
}

// New builds the limit "count per period" with opts, returning bad arguments as an error.
func New(count int, period time.Duration, opts ...core.Option) (Limiter, error) {
	l, err := hook.Build(count, period, opts)
	if err != nil {
		return nil, err
	}
	return l.(Limiter), nil
}

// Parse builds the limit of a policy's text form with opts, for an adapter's New.
func Parse(policy string, opts ...core.Option) (Limiter, error) {
	l, err := hook.Parse(policy, opts)
	if err != nil {
		return nil, err
	}
	return l.(Limiter), nil
}

// Option returns a core.Option that stores an adapter's setting (a deny handler in the
// framework's idiom, say) under key, for the adapter to read back with Limiter.Extension.
func Option(key, value any) core.Option {
	return hook.Extension(key, value).(core.Option)
}

// Refuse returns an option that fails the registration with err, for an adapter's option
// given a value it cannot use (a nil mux): refused where the limit is declared, with the
// route and line named, rather than failing each request.
func Refuse(err error) core.Option {
	return hook.Refuse(err).(core.Option)
}

// NoFrameworkIP marks the limits of an adapter whose framework has no client IP of its own
// (net/http): core.WithClientIPFromFramework is refused where such a limit is registered.
var NoFrameworkIP = Option(hook.NoFrameworkIPKey{}, true)
