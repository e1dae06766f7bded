package core

import "time"

// A Decision is a store's answer for one request: whether it is admitted, and the key's
// state that response headers report, exact from the recorded grants.
type Decision struct {
	// Allowed reports whether the request was admitted.
	Allowed bool
	// Rate is the policy's tightest rate: the one refusing the request longest or, when it
	// is admitted, the one with the least quota left.
	Rate Rate
	// Remaining is the quota Rate has left after this decision.
	Remaining int
	// RetryAfter is how long until a refused request of the same cost would be admitted
	// if nothing else is recorded meanwhile; 0 when admitted.
	RetryAfter time.Duration
	// Reset is how long until Rate's quota next grows: until the oldest grant it still
	// counts leaves its window (a rate of more than 256 per period is counted in 100
	// buckets: until the window's oldest bucket leaves, which is no later). Until then at most Remaining
	// more fit, which is what the RateLimit field's t reports. On a refusal it equals
	// RetryAfter, for a request of cost 1.
	Reset time.Duration
	// FullReset is how long until the key holds no grant in any of its windows.
	FullReset time.Duration
	// Grant names the grant this decision recorded, when it recorded one (an admission in
	// Enforce mode; any request in Penalty mode): the time it was recorded at, on the
	// store's clock and in its unit, which the store's Release (see Releaser) takes to give
	// that grant back. Meaningless when the decision recorded nothing.
	Grant int64
}

// A Mode says what a decision records.
type Mode uint8

const (
	// Enforce admits a request if every rate has room, and records only admitted ones:
	// under constant overload a client still gets its whole quota.
	Enforce Mode = iota
	// Penalty records refused requests too: a client that keeps sending while refused
	// stays refused, and under constant overload starves. Use it deliberately.
	Penalty
	// Peek records nothing; it reports what Enforce would decide.
	Peek
)
