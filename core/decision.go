package core

import "time"

// A Decision is a store's answer for one request, with the key's state that the response
// fields report, exact from the recorded grants.
type Decision struct {
	Allowed bool // the request was admitted
	// Rate is the tightest rate: the one with least left, then refusing longest (or resetting latest).
	Rate      Rate
	Remaining int // Rate's quota left after this decision
	// RetryAfter is how long until a refused request of the same cost would fit, if
	// nothing else is recorded meanwhile; 0 when admitted.
	RetryAfter time.Duration
	// Reset is how long at most Remaining more fit (the RateLimit field's t): until the
	// oldest grant Rate counts leaves its window (a rate of more than 256 per period is
	// counted in 100 buckets: the oldest holding one). On a refusal of cost 1 it equals RetryAfter.
	Reset     time.Duration
	FullReset time.Duration // until the key holds no grant in any window
	// Grant is when this decision's grant (an Enforce admission, any Penalty decision)
	// was recorded, on the store's clock and in its unit, for its Release; else meaningless.
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
