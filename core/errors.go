package core

import "errors"

// Errors of policies and decisions, wrapped: test with errors.Is.
var (
	// ErrBadPolicy: a policy's text does not parse, or a count or period is out of range.
	ErrBadPolicy = errors.New("reqlimit: bad policy")
	// ErrCostTooHigh: a request's cost exceeds a rate's count, so waiting cannot help.
	ErrCostTooHigh = errors.New("reqlimit: cost exceeds the limit")
)

var errNilPolicy = errors.New("reqlimit: query has no policy")
