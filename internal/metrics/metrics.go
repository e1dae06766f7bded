// Package metrics classifies limits' decisions for the metrics integrations (promlimit,
// otellimit), so that both name outcomes and store errors alike.
package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/reqlimit/reqlimit/core"
)

// Outcomes of a decision, as metrics count them.
const (
	Admitted = iota
	Refused
	DryRunRefused // over the limit, let through in dry run
	StoreError    // the store failed; the fail mode decided
	Released      // admitted, then given back by its response's status (core.WithCountWhen)
	NumOutcomes
)

// OutcomeNames are the outcomes' label values.
var OutcomeNames = [NumOutcomes]string{"admitted", "refused", "dry_run_refused", "store_error", "released"}

// Kinds of store error: a fixed set, so that a label stays bounded.
const (
	KindTimeout = iota
	KindCanceled
	KindConnection
	KindOther
	NumKinds
)

// Outcome classifies e, or returns -1 for an outcome this package does not know. A cost
// over the limit is Errored in core but refused by the limit, not by a failing store.
func Outcome(e *core.Event) int {
	switch e.Outcome {
	case core.Admitted:
		return Admitted
	case core.Released:
		return Released
	case core.Refused:
	case core.Errored:
		if !errors.Is(e.Err, core.ErrCostTooHigh) {
			return StoreError
		}
	default:
		return -1
	}
	if e.DryRun {
		return DryRunRefused
	}
	return Refused
}

// Kind classifies a store's error; a failed connection is named before a deadline that
// ended the retries.
func Kind(err error) int {
	switch {
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return KindConnection
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return KindTimeout
	}
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return KindTimeout
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return KindConnection
	}
	return KindOther
}
