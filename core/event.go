package core

import (
	"strconv"
	"time"
)

// An Outcome is what happened to one request.
type Outcome uint8

const (
	Admitted Outcome = iota // the request had room
	Refused                 // over the limit (let through in dry run)
	Errored                 // the store failed, the cost was over the limit, or the request ended first
	Released                // admitted, then given back: its status did not count (WithCountWhen)
)

var outcomeNames = [...]string{"admitted", "refused", "error", "released"}

// String names the outcome, for metric labels.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// An Event describes one decision, for observers.
type Event struct {
	Outcome    Outcome       // what happened to the request
	Scope, Key string        // the route, the WithScope name or "" (an unknown route); the client
	Policy     *Policy       // the limit's policy; its String is a bounded label, unlike Key
	Decision   Decision      // the store's answer; for Errored, the fail mode's, if any
	Err        error         // why, when Outcome is Errored
	DryRun     bool          // set on every event of a WithDryRun limit: a refusal was not enforced
	StoreTime  time.Duration // how long a store other than the MemoryStore took to answer; 0 for it
}
