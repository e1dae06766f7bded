// Package adapter is what reqlimit's adapters share: an adapter builds a Limiter from
// core's options, turns its framework's request into an Input, calls Check, which also
// sets the response's rate-limit fields, and answers a refusal with DenyBody or the
// application's deny handler.
package adapter

import (
	"errors"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// Input is what an adapter knows of a request.
type Input = hook.Input[core.Request]

// Verdict is a limit's answer for one request.
type Verdict = hook.Verdict[core.Decision]

// HeaderMap is an http.Header as a hook.HeaderSetter (see hook.HeaderMap).
type HeaderMap = hook.HeaderMap

// A Limiter is one registered limit (see hook.Limiter). Adapters build one when a route
// is registered, and call its Check for every request.
type Limiter = hook.Limiter[core.Request, core.Decision, *core.Policy]

// fromCore is how limits are built, registered by package core (see hook.Core).
var fromCore = hook.Registered[core.Option, Limiter]()

// Must builds the limit "count per period" with opts, for an adapter's Limit: bad
// arguments panic, naming the value and the application's line that registered the limit.
func Must(count int, period time.Duration, opts ...core.Option) Limiter {
	return fromCore.Must(count, period, opts)
}

// New builds the limit "count per period" with opts, returning bad arguments as an error.
func New(count int, period time.Duration, opts ...core.Option) (Limiter, error) {
	return fromCore.New(count, period, opts)
}

// Parse builds the limit of a policy's text form with opts, for an adapter's New.
func Parse(policy string, opts ...core.Option) (Limiter, error) {
	return fromCore.Parse(policy, opts)
}

// Option returns a core.Option that stores an adapter's setting (a deny handler in the
// framework's idiom, say) under key, for the adapter to read back with Limiter.Extension.
func Option(key, value any) core.Option { return fromCore.Extension(key, value) }

// Refuse returns an option that fails the registration with err, for an adapter's option
// given a value it cannot use (a nil mux): refused where the limit is declared, naming
// the line, rather than failing each request.
func Refuse(err error) core.Option { return fromCore.Refuse(err) }

// NoFrameworkIP marks the limits of an adapter whose framework has no client IP of its own
// (net/http): core.WithClientIPFromFramework is refused where such a limit is registered.
var NoFrameworkIP = Option(hook.NoFrameworkIPKey{}, true)

// Denies reports whether an application's deny handler answers the refused verdict v: a
// request over the limit, by the store's decision or FailLocal's local one. A refusal the
// store could not decide (core.FailClosed) and a cost above the limit keep the adapter's own
// answer, so that a handler written for "too many requests" cannot make an outage or a
// request that can never fit read as one.
func Denies(v Verdict) bool { return !v.Undecided && !errors.Is(v.Err, core.ErrCostTooHigh) }
