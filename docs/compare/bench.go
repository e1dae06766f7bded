package main

import (
	"fmt"
	"runtime"
	"time"
)

// benchKey is the one client every speed benchmark uses.
const benchKey = "192.0.2.1"

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
