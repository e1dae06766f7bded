// Package policytest builds the policies that reqlimit's own tests and its store
// conformance suite declare in code: their rates and texts are valid, so an error is a
// bug in the test, and panics.
package policytest

import "github.com/reqlimit/reqlimit/core"

// Of is core.NewPolicy for rates known to be valid.
func Of(rates ...core.Rate) *core.Policy {
	p, err := core.NewPolicy(rates...)
	if err != nil {
		panic(err)
	}
	return p
}

// Parse is core.ParsePolicy for a text known to be valid.
func Parse(text string) *core.Policy {
	p, err := core.ParsePolicy(text)
	if err != nil {
		panic(err)
	}
	return p
}
