package hook

import (
	"context"
	"time"
)

// A Core is how the adapters build their limits (O is core.Option, L this package's
// Limiter of core's types): core registers one, and package adapter reads it back. Go has
// no friend packages: exporting core's limiter and these functions would give core names
// no application should call, and core cannot import package adapter, which imports core.
type Core[O, L any] struct {
	// New, Must and Parse build a limit, and Extension and Refuse make options: package
	// adapter's New, Must, Parse, Option and Refuse, which say what each does.
	New       func(count int, period time.Duration, opts []O) (L, error)
	Must      func(count int, period time.Duration, opts []O) L
	Parse     func(policy string, opts []O) (L, error)
	Extension func(key, value any) O
	Refuse    func(err error) O
}

// registered is the one Core, a *Core[core.Option, adapter.Limiter].
var registered any

// Register makes c the Core that Registered returns. Package core calls it when it is
// initialized, before any package that imports core is.
func Register[O, L any](c *Core[O, L]) { registered = c }

// Registered returns the Core package core registered, of types O and L. It panics if
// there is none of those types: a mistake in package adapter, found when it starts.
func Registered[O, L any]() *Core[O, L] { return registered.(*Core[O, L]) }

// A Limiter is one registered limit, as adapters apply it; R is core.Request, D
// core.Decision, P *core.Policy.
type Limiter[R, D, P any] interface {
	// Check decides one request and, if h is not nil, writes its rate-limit fields into h
	// (and Retry-After on a refusal that waiting can help). It never fails: store errors
	// go to the error hook and the fail mode decides. ctx may be nil when in.Request is
	// set, whose context is then read only where needed.
	Check(ctx context.Context, in Input[R], h HeaderSetter) Verdict[D]
	// Settle finishes an admitted request whose Verdict carries a Release, once its
	// handler answered with status. A request whose status cannot be known (its handler
	// panicked, its connection was taken over) is not settled, and counts.
	Settle(ctx context.Context, v Verdict[D], status int)
	// Counts reports whether the limit's rule (core.WithCountWhen) counts a response
	// with status; without a rule every request counts.
	Counts(status int) bool
	// DenyBody returns the plain-text body of a refusal with status whose Verdict had err.
	DenyBody(status int, err error) string
	// Extension returns the adapter's setting stored under key by Core.Extension, or nil.
	Extension(key any) any
	// NeedsRequest reports whether Check reads more of Input.Request than its header
	// fields and context. Adapters whose Request allocates build one only then; otherwise
	// they pass a view of those that allocates nothing (adapter.HTTPRequest), which the
	// warning of an untrusted proxy reads.
	NeedsRequest() bool
	// FrameworkIP reports whether core.WithClientIPFromFramework was given.
	FrameworkIP() bool
	// Policy returns the limit's policy.
	Policy() P
	// WarnUnrouted tells the limit, which runs before routing, that a request it decided
	// with no route was routed to pattern: every route shares its bucket. It warns once
	// (core.WithWarnings), saying fix: how the adapter's users give it the route.
	WarnUnrouted(ctx context.Context, pattern, fix string)
	// WarnFrameworkIP tells the limit that the adapter keys a request on route by its
	// peer, not by the framework's client IP (core.WithClientIPFromFramework), which the
	// framework would take from any client (why). It warns once, saying fix.
	WarnFrameworkIP(ctx context.Context, route, why, fix string)
}
