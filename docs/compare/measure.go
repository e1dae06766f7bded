package main

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/reqlimit/reqlimit/core/storetest"
)

// An allowFunc decides one request for key. Library peers call their Go API; middleware
// peers send an in-process request through their framework and report a 2xx status.
type allowFunc func(key string) (bool, error)

// A trace is what one scenario saw: every admitted call's span, as the caller measured it,
// and the arrival times the exact log is replayed on.
type trace struct {
	base     time.Time
	admitted []storetest.Call
	arrivals []int64 // call starts, ns since base; sorted once the scenario ends
	calls    int
	errs     int
	firstErr error
}

// result is one scenario's figures.
type result struct {
	maxIn    int     // most admitted call spans wholly inside one interval of length T
	admitted int     // what the limiter admitted
	exact    int     // what an exact sliding log admits for the same arrivals
	util     float64 // admitted / exact, as a percentage
	calls    int
	errs     int
	firstErr error
}

func (tr *trace) result(n int, w time.Duration) result {
	slices.Sort(tr.arrivals)
	r := result{
		maxIn:    storetest.MaxInWindow(tr.admitted, w),
		admitted: len(tr.admitted),
		exact:    exactAdmits(tr.arrivals, n, int64(w)),
		calls:    tr.calls,
		errs:     tr.errs,
		firstErr: tr.firstErr,
	}
	if r.exact > 0 {
		r.util = 100 * float64(r.admitted) / float64(r.exact)
	}
	return r
}

// exactAdmits replays arrivals (sorted, ns) on an exact sliding log of n per w: an arrival
// at t is admitted when fewer than n admitted arrivals lie in (t-w, t]. It counts them by
// brute force, walking back over the grants, so it shares no code with any limiter.
func exactAdmits(arrivals []int64, n int, w int64) int {
	var grants []int64
	for _, t := range arrivals {
		in := 0
		for i := len(grants) - 1; i >= 0 && grants[i] > t-w; i-- {
			in++
		}
		if in < n {
			grants = append(grants, t)
		}
	}
	return len(grants)
}

// call makes one timed call and records it in tr. Not safe for concurrent use.
func (tr *trace) call(allow allowFunc, key string) {
	start := time.Now()
	ok, err := allow(key)
	end := time.Now()
	tr.calls++
	tr.arrivals = append(tr.arrivals, int64(start.Sub(tr.base)))
	switch {
	case err != nil:
		tr.errs++
		if tr.firstErr == nil {
			tr.firstErr = err
		}
	case ok:
		tr.admitted = append(tr.admitted, storetest.Call{Start: start, End: end})
	}
}

// sleepUntil sleeps until base+at; a caller running late goes at once, so a slow limiter
// sees the same arrivals, only later.
func sleepUntil(base time.Time, at time.Duration) {
	if d := time.Until(base.Add(at)); d > 0 {
		time.Sleep(d)
	}
}

// runSchedule makes one call per planned arrival, in order, from one goroutine. It stops
// at the end of the schedule or at limit, whichever comes first, so a limiter slower than
// the schedule cannot stretch the run.
func runSchedule(allow allowFunc, key string, schedule []time.Duration, limit time.Duration) *trace {
	tr := &trace{base: time.Now()}
	for _, at := range schedule {
		if time.Since(tr.base) > limit {
			break
		}
		sleepUntil(tr.base, at)
		tr.call(allow, key)
	}
	return tr
}

// steadySchedule is one arrival every gap for d: over the limit (125/s against 100/s with
// the defaults), so a limiter that admits every fitting request admits exactly its quota.
func steadySchedule(gap, d time.Duration) []time.Duration {
	var s []time.Duration
	for at := time.Duration(0); at < d; at += gap {
		s = append(s, at)
	}
	return s
}

// burstSchedule is bursts of 50 to 250 arrivals, a few µs apart, after idle gaps of 0.1 to
// 1.2 s, for about d. The seed fixes it, so every limiter gets the same plan. Gaps shorter
// than T catch token buckets (burst plus refill); bursts that straddle a window boundary
// catch fixed windows (2N).
func burstSchedule(seed uint64, d time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var s []time.Duration
	at := time.Duration(0)
	for at < d {
		size := 50 + rng.IntN(201)
		for range size {
			s = append(s, at)
			at += time.Duration(rng.IntN(40)) * time.Microsecond
		}
		at += 100*time.Millisecond + time.Duration(rng.Int64N(int64(1100*time.Millisecond)))
	}
	return s
}

// floodGranule thins the arrivals a flood records: each goroutine keeps its first start per
// granule, plus every admitted start. A dense flood would otherwise record tens of millions
// of refusals; the thinning can only delay the exact log's re-grants by one granule, a
// rounding error against T.
const floodGranule = 10 * time.Microsecond

// flood runs workers goroutines calling as fast as they can for d (and at most maxCalls
// calls each, so no loop is unbounded), then merges their traces.
func flood(allow allowFunc, key string, workers int, d time.Duration, maxCalls int) *trace {
	base := time.Now()
	deadline := base.Add(d)
	traces := make([]*trace, workers)
	var wg sync.WaitGroup
	for i := range traces {
		tr := &trace{base: base}
		traces[i] = tr
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(-1)
			for n := 0; n < maxCalls; n++ {
				start := time.Now()
				if !start.Before(deadline) {
					return
				}
				ok, err := allow(key)
				end := time.Now()
				tr.calls++
				at := int64(start.Sub(base))
				if g := at / int64(floodGranule); g != last || (ok && err == nil) {
					tr.arrivals = append(tr.arrivals, at)
					last = g
				}
				if err != nil {
					tr.errs++
					if tr.firstErr == nil {
						tr.firstErr = err
					}
				} else if ok {
					tr.admitted = append(tr.admitted, storetest.Call{Start: start, End: end})
				}
			}
		}()
	}
	wg.Wait()
	all := &trace{base: base}
	for _, tr := range traces {
		all.admitted = append(all.admitted, tr.admitted...)
		all.arrivals = append(all.arrivals, tr.arrivals...)
		all.calls += tr.calls
		all.errs += tr.errs
		if all.firstErr == nil {
			all.firstErr = tr.firstErr
		}
	}
	return all
}
