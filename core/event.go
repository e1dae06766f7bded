package core

import "time"

// An Outcome is what happened to one request.
type Outcome uint8

const (
	Admitted Outcome = iota // the request had room
	Refused                 // over the limit (let through in dry run)
	Errored                 // the store failed, and the fail mode decided
	Released                // admitted, then given back: its status did not count (WithCountWhen)
)

// String names the outcome, for metric labels.
func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Refused:
		return "refused"
	case Errored:
		return "error"
	case Released:
		return "released"
	}
	return "outcome(" + itoa(int(o)) + ")"
}

// An Event describes one decision, for observers.
type Event struct {
	Outcome Outcome
	// Scope is the route, the WithScope name, or "" for an unknown route; Key the client.
	Scope, Key string
	// Policy is the limit's policy; its String is a bounded label, unlike Key.
	Policy   *Policy
	Decision Decision
	Err      error // the store's error when Outcome is Errored
	DryRun   bool  // a refusal was not enforced
	// StoreTime is how long a store other than the MemoryStore took to decide or fail; 0 for it.
	StoreTime time.Duration
}
