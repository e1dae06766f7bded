package main

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchKey is the one client every speed benchmark uses.
const benchKey = "192.0.2.1"

// nsPerOp runs allow on one key, serially, under testing.Benchmark, best of rounds runs:
// the machine is shared, and the fastest run is the one least disturbed by others. It
// fails if any call was refused or errored, since the benchmark is of the admitted path.
func nsPerOp(allow allowFunc, rounds int) (float64, error) {
	best := 0.0
	for range rounds {
		var refused int
		var firstErr error
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				ok, err := allow(benchKey)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if !ok {
					refused++
				}
			}
		})
		if firstErr != nil {
			return 0, firstErr
		}
		if refused > 0 {
			return 0, fmt.Errorf("%d of the benchmark's calls were refused: not the admitted path", refused)
		}
		if ns := float64(r.T.Nanoseconds()) / float64(r.N); best == 0 || ns < best {
			best = ns
		}
	}
	return best, nil
}

// memKeys builds n distinct client IPs before measuring, so the key strings themselves
// are not charged to the limiter (the copies it keeps are).
func memKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
	}
	return keys
}

// heapPerKey is the growth of the live heap, per key, after one admitted request from
// each of keys. The first call (another key) warms pools and lazy tables up before the
// first reading, and everything measured is kept alive until the second.
func heapPerKey(allow allowFunc, keys []string) (float64, error) {
	if _, err := allow("192.0.2.250"); err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		if _, err := allow(k); err != nil {
			return 0, err
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(allow)
	runtime.KeepAlive(keys)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(keys)), nil
}

// redisPerKey is heapPerKey for Redis peers, read from the server: their Go heap holds
// nothing per key.
func redisPerKey(srv *redisServer, allow allowFunc, keys []string) (float64, error) {
	if _, err := allow("192.0.2.250"); err != nil {
		return 0, err
	}
	before, err := srv.usedMemory()
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if _, err := allow(k); err != nil {
			return 0, err
		}
	}
	after, err := srv.usedMemory()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(len(keys)), nil
}

// elapsed formats a stage's duration for the progress log.
func elapsed(start time.Time) string { return time.Since(start).Round(10 * time.Millisecond).String() }
