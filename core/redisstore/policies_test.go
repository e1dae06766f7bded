package redisstore_test

import "github.com/reqlimit/reqlimit/internal/policytest"

// The tests' own policies, valid by construction.
var (
	mustPolicy = policytest.Of
	mustParse  = policytest.Parse
)
