package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
)

// The speed columns are timed in rounds of batches rather than in one long run: the
// machine is shared, and the median round shrugs off the rounds a neighbour disturbed most,
// where one long run averages them in. A middleware's route and its bare route take turns
// within every round, so whatever load the machine carries at the time weighs on both
// alike, and their ratio is steadier than the ratio of two runs made minutes apart.
// Batches last about 10 ms, several of the scheduler's time slices and several garbage
// collections of a route that allocates: a shorter batch would catch or escape a stall or
// a collection whole, and the rounds would scatter far more than the load changes.

// A speedPlan says how the speed columns are timed.
type speedPlan struct {
	rounds int           // rounds of batches, each side one batch per round
	batch  time.Duration // the time one batch of one side is sized to take
	now    func() time.Time
}

// maxBatch bounds a batch's calls, so that sizing ends even for a call too quick to see.
const maxBatch = 1 << 24

// A measurement that runs overrun times longer than planned stops once it has minRounds,
// so that neither a limiter that slows down on the way (a stalled Redis) nor a machine
// busier than usual can stretch the run much.
const (
	overrun   = 2
	minRounds = 3
)

// A batchFunc makes n admitted calls and reports how long they took.
type batchFunc func(n int) (time.Duration, error)

// batcher times allow on benchKey. Any refusal fails the batch: the columns are of the
// admitted path.
func (p speedPlan) batcher(allow allowFunc) batchFunc {
	return func(n int) (time.Duration, error) {
		refused := 0
		start := p.now()
		for range n {
			ok, err := allow(benchKey)
			if err != nil {
				return 0, err
			}
			if !ok {
				refused++
			}
		}
		d := p.now().Sub(start)
		if refused > 0 {
			return 0, fmt.Errorf("%d of %d calls were refused: not the admitted path", refused, n)
		}
		return d, nil
	}
}

// batchSize is how many calls each side's batch gets, so that a round takes about target
// per side. The same n serves all sides, so that a round compares equal numbers of calls.
// A trial batch doubles until it takes an eighth of the round, warming every side up; the
// batch is then sized from the quickest of a few more trials, since a disturbed trial can
// only make the calls look slower, and the batches too small. A second pass at the size
// found corrects an estimate made from calls still warming up.
func batchSize(target time.Duration, sides ...batchFunc) (int, error) {
	round := time.Duration(len(sides)) * target
	n := 1
	for ; n < maxBatch; n *= 2 {
		d, err := timeSides(sides, n)
		if err != nil {
			return 0, err
		}
		if d >= round/8 {
			break
		}
	}
	for range sizingPasses {
		quickest := time.Duration(math.MaxInt64)
		for range sizingTrials {
			d, err := timeSides(sides, n)
			if err != nil {
				return 0, err
			}
			quickest = min(quickest, d)
		}
		if quickest <= 0 {
			return maxBatch, nil
		}
		n = int(min(max(float64(n)*float64(round)/float64(quickest), 1), maxBatch))
	}
	return n, nil
}

// batchSize sizes its batch sizingPasses times, each from the quickest of sizingTrials.
const (
	sizingPasses = 2
	sizingTrials = 3
)

// timeSides is the time of one batch of n calls of every side, added up.
func timeSides(sides []batchFunc, n int) (time.Duration, error) {
	var total time.Duration
	for _, side := range sides {
		d, err := side(n)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// timeRounds times one batch of n calls of each side per round, each after a collection,
// and returns each side's ns per call, round by round. The side that goes first rotates
// from round to round, so that none always inherits the caches, or the clock speed, the
// others left behind. It stops early, after minRounds, once it has taken longer than budget.
func timeRounds(sides []batchFunc, n, rounds int, budget time.Duration, now func() time.Time) ([][]float64, error) {
	out := make([][]float64, len(sides))
	start := now()
	for round := range rounds {
		if round >= minRounds && now().Sub(start) > budget {
			break
		}
		for k := range sides {
			i := (round + k) % len(sides)
			runtime.GC()
			d, err := sides[i](n)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], float64(d.Nanoseconds())/float64(n))
		}
	}
	return out, nil
}

// A spread is a figure over rounds: the median round's, and the quartiles, between which
// the middle half of the rounds lie.
type spread struct {
	median, lo, hi float64
	rounds         int // 0: not measured
}

// summarize is the spread of samples; NaNs (a round that could not be measured) are left
// out. It does not reorder samples.
func summarize(samples []float64) spread {
	s := make([]float64, 0, len(samples))
	for _, x := range samples {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return spread{}
	}
	slices.Sort(s)
	return spread{median: quantile(s, 0.5), lo: quantile(s, 0.25), hi: quantile(s, 0.75), rounds: len(s)}
}

// quantile is the q-quantile of sorted, non-empty s, interpolated linearly between the two
// nearest ranks (the common definition, so that the page's figures can be checked by hand).
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// pairSpreads compares the rounds of an interleaved measurement one by one: what the
// limiter added to the bare route (ns) and the ratio of the two. A round whose bare batch
// took no measurable time has no ratio.
func pairSpreads(bare, limited []float64) (added, ratio spread) {
	diffs := make([]float64, 0, len(bare))
	ratios := make([]float64, 0, len(bare))
	for i := range min(len(bare), len(limited)) {
		if bare[i] <= 0 {
			continue
		}
		diffs = append(diffs, limited[i]-bare[i])
		ratios = append(ratios, limited[i]/bare[i])
	}
	return summarize(diffs), summarize(ratios)
}

var errNoRound = errors.New("no round could be timed")

// measureGroup times peers that compete for one column in the same rounds, so that
// whatever load the machine carries falls on all of them alike: library peers of one kind
// (in memory, on Redis) by their ns per call, with bare nil; a framework's middleware
// against its bare route, by what each adds per request (ns) and its ratio to the route.
// Each batch starts after a collection, so that none pays for another's garbage.
func measureGroup(bare allowFunc, peers []allowFunc, p speedPlan) (speeds, ratios []spread, err error) {
	sides := make([]batchFunc, 0, len(peers)+1)
	if bare != nil {
		sides = append(sides, p.batcher(bare))
	}
	for _, a := range peers {
		sides = append(sides, p.batcher(a))
	}
	n, err := batchSize(p.batch, sides...)
	if err != nil {
		return nil, nil, err
	}
	s, err := timeRounds(sides, n, p.rounds, p.budget(len(sides)), p.now)
	if err != nil {
		return nil, nil, err
	}
	for i := range peers {
		var speed, ratio spread
		if bare == nil {
			speed = summarize(s[i])
		} else {
			speed, ratio = pairSpreads(s[0], s[i+1])
		}
		if speed.rounds == 0 {
			return nil, nil, errNoRound
		}
		speeds, ratios = append(speeds, speed), append(ratios, ratio)
	}
	return speeds, ratios, nil
}

// budget is how long rounds of sides batches may take before timeRounds cuts them short.
func (p speedPlan) budget(sides int) time.Duration {
	return overrun * time.Duration(p.rounds*sides) * p.batch
}
