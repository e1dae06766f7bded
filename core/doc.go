// Package core holds what every reqlimit limit is made of: the options that configure it,
// the policy it enforces and the store that remembers its grants.
//
// Applications put limits on routes with an adapter (ginlimit, echolimit, fiberlimit,
// nethttp) and configure them with this package's options:
//
//	r.GET("/search", ginlimit.Limit(500, 2*time.Second, core.WithRate(2000, 10*time.Second)), h)
//
// "N per T" means: in any interval of length T at most N requests are admitted, and every
// request that fits is. Start with the options; Counter counts events outside HTTP. Store
// authors implement Store and test it with package storetest.
package core
