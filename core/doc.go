// Package core is reqlimit's engine: policies, the strict sliding-window decision, the
// stores that keep grant logs, and the middleware logic every adapter (ginlimit, echolimit,
// fiberlimit, nethttp) shares.
//
// A Policy is one or more rates "N per T". Its promise: in any interval of length T, at most
// N units are admitted, and every request that fits is admitted. A Store decides a Query
// (policy, scope, key, cost, mode) and answers with a Decision: allowed or not, the
// tightest rate's remaining quota, the exact wait until a request of the same cost fits,
// and when the quota is whole again. MemoryStore is the in-process store and the default;
// package redisstore shares limits between processes.
//
// Applications rarely use this package beyond its options: an adapter's Limit builds a
// Limiter from a count, a period and Options (WithRate, WithStore, WithKey, WithSkip,
// WithFailMode, WithObserver, ...), and calls its Check for every request. Counter counts
// events over a sliding window outside HTTP, on the same engine and stores.
//
// Time is injectable everywhere: MemoryStore takes a Clock (ManualClock for tests) or an
// explicit time through DecideAt, and Policy.Apply takes the time as an argument.
package core
