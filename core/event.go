package core

// An Outcome is what happened to one request.
type Outcome uint8

const (
	// Admitted: the request had room and went on to the handler.
	Admitted Outcome = iota
	// Refused: the request was over the limit (in dry-run mode it went on regardless).
	Refused
	// Errored: the store failed and the fail mode decided.
	Errored
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
	}
	return "outcome(" + itoa(int(o)) + ")"
}

// An Event describes one decision, for observers.
type Event struct {
	Outcome Outcome
	// Scope is the bucket's scope (the route pattern unless WithScope set one; "" when the
	// route is unknown) and Key the client's identity in it.
	Scope, Key string
	Decision   Decision
	// Err is the store's error when Outcome is Errored.
	Err error
	// DryRun reports that the limit only observes: a refusal was not enforced.
	DryRun bool
}
