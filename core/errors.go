package core

import "errors"

// Errors a policy or a decision can fail with. They are wrapped with the offending value;
// test for them with errors.Is.
var (
	// ErrBadCount means a rate's count is below 1.
	ErrBadCount = errors.New("reqlimit: count must be at least 1")
	// ErrBadPeriod means a rate's period is not positive (or too short for its form).
	ErrBadPeriod = errors.New("reqlimit: period must be positive")
	// ErrBadPolicy means a policy's text could not be parsed or it holds no rate.
	ErrBadPolicy = errors.New("reqlimit: bad policy")
	// ErrCostTooHigh means a request's cost exceeds the count of one of its rates, so it
	// could never be admitted. It is an error, not a refusal, because waiting cannot help.
	ErrCostTooHigh = errors.New("reqlimit: cost exceeds the limit")
)

var errNilPolicy = errors.New("reqlimit: query has no policy")
