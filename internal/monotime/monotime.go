// Package monotime reads the runtime's monotonic clock directly: the reading time.Since
// takes, without the checks around it (the Time's monotonic flag, a testing/synctest
// bubble), for a caller that makes them once. The benchmarks' floors read it too, so that
// a floor never pays for a clock the library does not.
package monotime

import _ "unsafe" // for go:linkname

// Nanotime returns the monotonic clock in nanoseconds, from an arbitrary start. The
// runtime keeps it linkable for the packages that read it so (go.dev/issue/67401).
//
//go:linkname Nanotime runtime.nanotime
func Nanotime() int64
