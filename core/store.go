package core

import "context"

// A Store keeps the grant logs of keys and decides requests against them. Implementations
// must be safe for concurrent use, decide and record atomically (two concurrent requests
// can never both take the last slot), and keep the semantics of Policy.Apply.
//
// MemoryStore is the in-process implementation; package redisstore shares limits between
// processes.
type Store interface {
	// Decide admits or refuses q and records it as q.Mode says.
	Decide(ctx context.Context, q Query) (Decision, error)
}

// A Query asks a store for one decision.
type Query struct {
	// Policy is the limit to enforce. Its text is part of the bucket's identity, so two
	// different policies never share a bucket.
	Policy *Policy
	// Scope and Key name the bucket: the middlewares put the route pattern in Scope and the
	// client's identity (its IP by default) in Key. Either may be empty.
	Scope, Key string
	// Cost is how many units the request takes; below 1 counts as 1.
	Cost int
	// Mode says what the decision records; the zero value is Enforce.
	Mode Mode
}
