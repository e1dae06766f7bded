// Package core holds what a reqlimit limit is made of: the options that configure it, the
// policy it enforces and the store that keeps its grants. Adapters (ginlimit, echolimit,
// fiberlimit, nethttp) put limits on routes:
//
//	r.GET("/search", ginlimit.Limit(500, 2*time.Second, core.WithRate(2000, 10*time.Second)), h)
//
// "N per T" is strict: in any interval of length T at most N requests are admitted, and
// every request that fits is. Counter counts events outside HTTP; store authors implement
// Store and test it with package storetest.
package core
