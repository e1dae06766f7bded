// Package core holds what every reqlimit limit is made of: the options that configure it,
// the policy it enforces and the store that remembers its grants.
//
// Applications put limits on routes with an adapter (ginlimit, echolimit, fiberlimit,
// nethttp) and configure them with this package's options:
//
//	r.GET("/search", ginlimit.Limit(500, 2*time.Second, core.WithRate(2000, 10*time.Second)), h)
//
// "N per T" means that in any interval of length T at most N requests are admitted, and
// that every request that fits is admitted. Start with the options (WithKey, WithStore,
// WithFailMode, ...). Counter counts events outside HTTP on the same engine and stores.
// Store authors implement Store, deciding a Query into a Decision, and test their store
// with package storetest.
package core
