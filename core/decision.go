package core

import "time"

// A Decision is a store's answer for one request: whether it is admitted, and the state of
// the key that response headers report. Durations are exact, computed from the recorded
// grants. A store fills every field; the zero Decision refuses.
type Decision struct {
	// Allowed reports whether the request was admitted.
	Allowed bool
	// Rate is the policy's tightest rate: the one refusing the request longest or, when it
	// is admitted, the one with the least quota left.
	Rate Rate
	// Remaining is the quota Rate has left after this decision.
	Remaining int
	// RetryAfter is, for a refused request, how long until a request of the same cost
	// would be admitted if nothing else is recorded meanwhile; 0 when admitted.
	RetryAfter time.Duration
	// Reset is how long until Rate's quota is whole again.
	Reset time.Duration
	// FullReset is how long until the key holds no grant in any of its windows.
	FullReset time.Duration
}

// A Mode says what a decision records.
type Mode uint8

const (
	// Enforce admits a request if every rate has room and records only admitted requests.
	// Under constant overload a client still gets its whole quota: each slot freed by time
	// goes to the next request that fits.
	Enforce Mode = iota
	// Penalty records refused requests too, so a client that keeps sending while refused
	// stays refused: its own refusals fill the window. Under constant overload it starves,
	// which is the point (some systems behave so), so use it only deliberately.
	Penalty
	// Peek records nothing; it reports what Enforce would decide.
	Peek
)
