// Package nocopy is the one place where reqlimit views bytes as a string, or a string as
// bytes, without copying, so that the hot path allocates nothing in memory mode
// (TestLimitAddsNoAllocation, internal/adaptertest's allocation checks). Callers must not
// change the bytes while the string is in use, nor write to bytes viewed from a string.
package nocopy

import "unsafe"

// String returns b's bytes as a string, without copying.
func String(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Bytes returns s's bytes, without copying; they must not be written to.
func Bytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
