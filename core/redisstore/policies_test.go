package redisstore_test

import "github.com/reqlimit/reqlimit/core"

// mustPolicy is core.NewPolicy for the tests' own, valid, rates.
func mustPolicy(rates ...core.Rate) *core.Policy {
	p, err := core.NewPolicy(rates...)
	if err != nil {
		panic(err)
	}
	return p
}

// mustParse is core.ParsePolicy for the tests' own, valid, texts.
func mustParse(text string) *core.Policy {
	p, err := core.ParsePolicy(text)
	if err != nil {
		panic(err)
	}
	return p
}
