package core

import "context"

// A Store keeps keys' grants and decides requests on them, safe for concurrent use and
// atomic: two requests never both take the last slot. Package storetest checks a Store;
// redisstore shares limits between processes.
type Store interface {
	// Decide admits or refuses q and records it as q.Mode says.
	Decide(ctx context.Context, q Query) (Decision, error)
}

// A Query asks a store for one decision.
type Query struct {
	// Policy is the limit to enforce; its text is part of the bucket's identity.
	Policy *Policy
	// Scope and Key name the bucket: the limits put the route in Scope and the client
	// (its IP by default) in Key. Either may be empty.
	Scope, Key string
	Cost       int  // the units the request takes; below 1 counts as 1
	Mode       Mode // what the decision records; the zero value is Enforce
}
