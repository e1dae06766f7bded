package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock that only the fake calls move, so that the speed code can be
// checked to the nanosecond without depending on how fast or loaded the machine is.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// costs returns an allowFunc that admits and moves c on by cost per call.
func (c *fakeClock) costs(cost time.Duration) allowFunc {
	return func(string) (bool, error) {
		c.t = c.t.Add(cost)
		return true, nil
	}
}

func TestSummarizeMedianAndQuartiles(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []float64
		want    spread
	}{
		{"none", nil, spread{}},
		{"one", []float64{7}, spread{7, 7, 7, 1}},
		// Sorted: 1 2 3 4 5; ranks 1, 2 and 3 of 0..4.
		{"odd, unsorted", []float64{5, 1, 4, 2, 3}, spread{3, 2, 4, 5}},
		// Sorted: 1 2 3 4; positions 0.75, 1.5 and 2.25 of 0..3.
		{"even", []float64{4, 3, 2, 1}, spread{median: 2.5, lo: 1.75, hi: 3.25, rounds: 4}},
		{"an outlier moves neither", []float64{2.31, 2.25, 2.40, 2.30, 2.35, 9.9, 2.28, 2.33, 2.32}, spread{2.32, 2.30, 2.35, 9}},
		{"NaN left out", []float64{1, math.NaN(), 3}, spread{2, 1.5, 2.5, 2}},
	} {
		got := summarize(c.samples)
		if !near(got.median, c.want.median) || !near(got.lo, c.want.lo) || !near(got.hi, c.want.hi) || got.rounds != c.want.rounds {
			t.Errorf("%s: summarize(%v) = %+v, want %+v", c.name, c.samples, got, c.want)
		}
	}
	in := []float64{3, 1, 2}
	summarize(in)
	if !slices.Equal(in, []float64{3, 1, 2}) {
		t.Errorf("summarize reordered its samples: %v", in)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestPairSpreadsRoundByRound checks that the ratio and the added time are taken round by
// round, then summarised: not the ratio of two medians.
func TestPairSpreadsRoundByRound(t *testing.T) {
	// Round 3 was slowed for both sides: its difference is like the others', its ratio
	// lower. A zero bare time (unmeasurable) is left out of both.
	bare := []float64{100, 110, 400, 90, 105, 0}
	limited := []float64{231, 253, 600, 216, 231, 50}
	added, ratio := pairSpreads(bare, limited)
	// Differences 131 143 200 126 126; ratios 2.31 2.30 1.5 2.4 2.2.
	if want := (spread{median: 131, lo: 126, hi: 143, rounds: 5}); added != want {
		t.Errorf("added = %+v, want %+v", added, want)
	}
	if want := (spread{median: 2.30, lo: 2.2, hi: 2.31, rounds: 5}); !near(ratio.median, want.median) || !near(ratio.lo, want.lo) || !near(ratio.hi, want.hi) || ratio.rounds != want.rounds {
		t.Errorf("ratio = %+v, want %+v", ratio, want)
	}
}

// TestTimeRoundsAlternatesOrder checks that the bare route goes first in every other
// round, that every round times both sides with the same n, and that the round count is
// kept.
func TestTimeRoundsAlternatesOrder(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	var order []string
	side := func(name string, per time.Duration) batchFunc {
		return func(n int) (time.Duration, error) {
			if n != 8 {
				t.Errorf("%s: batch of %d, want 8", name, n)
			}
			order = append(order, name)
			clock.t = clock.t.Add(time.Duration(n) * per)
			return time.Duration(n) * per, nil
		}
	}
	s, err := timeRounds([]batchFunc{side("bare", 100), side("limited", 250)}, 8, 4, time.Hour, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bare", "limited", "limited", "bare", "bare", "limited", "limited", "bare"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	// Whatever the order, each side's times go to that side.
	if !slices.Equal(s[0], []float64{100, 100, 100, 100}) || !slices.Equal(s[1], []float64{250, 250, 250, 250}) {
		t.Errorf("ns per call: bare %v, limited %v; want 100s and 250s", s[0], s[1])
	}
}

// TestTimeRoundsStopsOverBudget checks the bound on a limiter that slows down: once over
// budget, the rounds stop, but not before minRounds.
func TestTimeRoundsStopsOverBudget(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	calls := 0
	slow := func(n int) (time.Duration, error) {
		calls++
		clock.t = clock.t.Add(time.Second)
		return time.Second, nil
	}
	s, err := timeRounds([]batchFunc{slow}, 1, 1000, 10*time.Millisecond, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if len(s[0]) != minRounds || calls != minRounds {
		t.Errorf("%d rounds, %d batches after going over budget; want %d", len(s[0]), calls, minRounds)
	}
}

func TestBatchSize(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	plan := speedPlan{now: clock.now}
	// A round of both sides must take 2×10µs: at 350 ns per pair of calls, 57 of each.
	// (The trial batch doubles to 8, the first to take an eighth of that.)
	n, err := batchSize(10*time.Microsecond, plan.batcher(clock.costs(100)), plan.batcher(clock.costs(250)))
	if err != nil || n != 57 {
		t.Errorf("batchSize = %d, %v; want 57", n, err)
	}
	// A trial slowed by a neighbour does not shrink the batch: the quickest trial counts.
	trials := 0
	disturbed := func(n int) (time.Duration, error) {
		trials++
		d := time.Duration(n) * 100
		if trials == 4 { // the first of the sizing trials, after 1, 2 and 4 calls
			d *= 50
		}
		return d, nil
	}
	if n, err := batchSize(2*time.Microsecond, disturbed); err != nil || n != 20 {
		t.Errorf("batchSize with one disturbed trial = %d, %v; want 20 (2 µs of 100 ns calls)", n, err)
	}
	// A call too quick to see cannot keep the doubling going for ever.
	free := func(int) (time.Duration, error) { return 0, nil }
	if n, err := batchSize(time.Millisecond, free); err != nil || n != maxBatch {
		t.Errorf("batchSize of a free call = %d, %v; want maxBatch", n, err)
	}
}

// TestMeasureGroupOnFakeRoutes runs whole interleaved measurements on calls of known
// cost: two limiters add 150 and 50 ns to a 100 ns route (×2.5 and ×1.5) in every round,
// and two libraries take 40 and 90 ns per call.
func TestMeasureGroupOnFakeRoutes(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	plan := speedPlan{rounds: 6, batch: 10 * time.Microsecond, now: clock.now}
	added, ratio, err := measureGroup(clock.costs(100), []allowFunc{clock.costs(250), clock.costs(150)}, plan)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]spread{{{150, 150, 150, 6}, {2.5, 2.5, 2.5, 6}}, {{50, 50, 50, 6}, {1.5, 1.5, 1.5, 6}}} {
		if added[i] != want[0] || ratio[i] != want[1] {
			t.Errorf("limiter %d: added %+v, ratio %+v; want %+v, %+v", i, added[i], ratio[i], want[0], want[1])
		}
	}
	alone, ratio, err := measureGroup(nil, []allowFunc{clock.costs(40), clock.costs(90)}, plan)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []spread{{40, 40, 40, 6}, {90, 90, 90, 6}} {
		if alone[i] != want || ratio[i].rounds != 0 {
			t.Errorf("library %d: %+v, ratio %+v; want %+v and no ratio", i, alone[i], ratio[i], want)
		}
	}
}

func TestMeasureFailsOnRefusalOrError(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	plan := speedPlan{rounds: 3, batch: time.Microsecond, now: clock.now}
	refuses := func(string) (bool, error) { return false, nil }
	if _, _, err := measureGroup(clock.costs(100), []allowFunc{refuses}, plan); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a refusing limiter: error %v, want one saying calls were refused", err)
	}
	broken := errors.New("store down")
	fails := func(string) (bool, error) { return true, broken }
	if _, _, err := measureGroup(nil, []allowFunc{clock.costs(40), fails}, plan); !errors.Is(err, broken) {
		t.Errorf("a failing limiter: error %v, want %v", err, broken)
	}
}

// TestCellsNeverNegative checks the documented cell formats, and that a cost measured at
// or below zero is never printed as a negative number, in the table or in the findings.
func TestCellsNeverNegative(t *testing.T) {
	mw := func(name string, added, ratio spread) row {
		return row{peer: peer{name: name, framework: "Echo v4"}, speed: added, overhead: ratio}
	}
	for _, c := range []struct {
		name         string
		r            row
		ns, overhead string
	}{
		{"library", row{speed: spread{95.4, 93.2, 99.1, 200}}, "95 (93–99)", ""},
		{"middleware", mw("m", spread{334, 310, 350, 200}, spread{2.3149, 2.251, 2.4, 200}), "334 †", "×2.31 (2.25–2.40)"},
		{"negative median", mw("m", spread{-257, -300, -10, 200}, spread{0.75, 0.7, 0.99, 200}), "≤0 †", "×0.75 (0.70–0.99)"},
		{"zero median", mw("m", spread{0, -3, 4, 200}, spread{1, 0.99, 1.01, 200}), "≤0 †", "×1.00 (0.99–1.01)"},
		{"under half a ns", mw("m", spread{0.3, -1, 2, 200}, spread{1, 0.99, 1.01, 200}), "<1 †", "×1.00 (0.99–1.01)"},
		{"not measured", row{}, "", ""},
	} {
		if got := nsCell(c.r); got != c.ns {
			t.Errorf("%s: nsCell = %q, want %q", c.name, got, c.ns)
		}
		if got := overheadCell(c.r); got != c.overhead {
			t.Errorf("%s: overheadCell = %q, want %q", c.name, got, c.overhead)
		}
	}
	for _, v := range []float64{-1e9, -319, -0.4, 0} {
		if got := nsFigure(v); got != "≤0" {
			t.Errorf("nsFigure(%v) = %q, want ≤0", v, got)
		}
	}

	// A peer whose median cost is negative, clearly faster than reqlimit's adapter: the
	// finding must say so by the ratios the table shows, without a negative figure.
	rows := []row{
		mw("reqlimit `echolimit.Limit` (Echo v4, memory)", spread{65, 40, 90, 200}, spread{1.06, 1.04, 1.08, 200}),
		mw("Echo v4 `RateLimiter` (memory)", spread{-257, -300, -200, 200}, spread{0.75, 0.72, 0.78, 200}),
	}
	found := strings.Join(findings(rows), "\n")
	if !strings.Contains(found, "Echo v4 `RateLimiter` (memory) (×0.75 against ×1.06)") {
		t.Errorf("findings do not report the faster peer by its ratio:\n%s", found)
	}
	negative := regexp.MustCompile(`[-−]\s*\d`)
	if negative.MatchString(found) {
		t.Errorf("findings print a negative figure:\n%s", found)
	}
	var line string
	for l := range strings.SplitSeq(markdown(env{}, full, rows), "\n") {
		if strings.HasPrefix(l, "| Echo v4 `RateLimiter`") {
			line = l // the main table's row; the raw counts' comes after
			break
		}
	}
	if negative.MatchString(line) || !strings.Contains(line, "| ≤0 † | ×0.75 (0.72–0.78) |") {
		t.Errorf("table row %q, want its speed cells to read ≤0 † and ×0.75 (0.72–0.78)", line)
	}
}

// TestFindingsWeighTheSpread checks that a peer is called faster than reqlimit only when
// the middle halves of their rounds do not overlap, and otherwise said to be within noise.
func TestFindingsWeighTheSpread(t *testing.T) {
	lib := func(name string, s spread) row { return row{peer: peer{name: name}, speed: s} }
	rows := []row{
		lib("reqlimit `Decide` (memory)", spread{100, 95, 105, 200}),
		lib("quick-lib", spread{80, 78, 90, 200}),
		// Its median lies below reqlimit's lower quartile, its upper quartile does not.
		lib("close-lib", spread{92, 85, 99, 200}),
		lib("slow-lib", spread{150, 140, 160, 200}),
	}
	found := findings(rows)
	var clear, noisy string
	for _, f := range found {
		switch {
		case strings.HasPrefix(f, "Faster than reqlimit, beyond"):
			clear = f
		case strings.HasPrefix(f, "Faster than reqlimit by the median"):
			noisy = f
		}
	}
	if !strings.Contains(clear, "quick-lib (80 ns against 100)") || strings.Contains(clear, "close-lib") || strings.Contains(clear, "slow-lib") {
		t.Errorf("clearly faster: %q", clear)
	}
	if !strings.Contains(noisy, "close-lib (92 ns against 100)") || strings.Contains(noisy, "quick-lib") || strings.Contains(noisy, "slow-lib") {
		t.Errorf("faster within noise: %q", noisy)
	}
}

// TestMethodTextDescribesInterleaving checks that the page explains what the brackets and
// ≤0 mean, with this run's own sizes.
func TestMethodTextDescribesInterleaving(t *testing.T) {
	page := markdown(env{}, full, nil)
	for _, want := range []string{
		"timed interleaved",
		fmt.Sprintf("%d rounds", full.speedRounds),
		"about " + human(full.speedBatch),
		"the median of the rounds' ratios",
		"quartiles",
		"reads **≤0**, never a negative cost",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the method text lacks %q", want)
		}
	}
	if strings.Contains(page, "best of") {
		t.Error("the method text still speaks of a best of runs")
	}
}

// TestMeasureGroupOnRealRoutes runs a tiny interleaved measurement through a real
// framework harness: it must time every round and find both sides admitted. It asserts
// nothing about the figures, which depend on the machine.
func TestMeasureGroupOnRealRoutes(t *testing.T) {
	var p peer
	for _, q := range peers() {
		if q.framework == "net/http" && strings.HasPrefix(q.name, "reqlimit") {
			p = q
		}
	}
	limited, err := p.newAllow(p.fast.count, p.fast.period)
	if err != nil {
		t.Fatal(err)
	}
	plan := speedPlan{rounds: 4, batch: 200 * time.Microsecond, now: time.Now}
	a, r, err := measureGroup(bareRoutes[p.framework](), []allowFunc{limited}, plan)
	if err != nil {
		t.Fatal(err)
	}
	if added, ratio := a[0], r[0]; ratio.rounds < minRounds || added.rounds != ratio.rounds || !(ratio.median > 0) || math.IsInf(ratio.median, 0) {
		t.Errorf("added %+v, ratio %+v: want at least %d rounds of finite positive ratios", added, ratio, minRounds)
	}
}
