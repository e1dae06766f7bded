package core

import "errors"

// Errors a policy or a decision can fail with. They are wrapped with the offending value;
// test for them with errors.Is.
var (
	// ErrBadPolicy means a policy cannot be enforced: its text could not be parsed, it
	// holds no rate, or a rate's count or period is out of range.
	ErrBadPolicy = errors.New("reqlimit: bad policy")
	// ErrCostTooHigh means a request's cost exceeds the count of one of its rates, so it
	// could never be admitted. It is an error, not a refusal, because waiting cannot help.
	ErrCostTooHigh = errors.New("reqlimit: cost exceeds the limit")
)

var errNilPolicy = errors.New("reqlimit: query has no policy")
