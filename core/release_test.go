package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// A held grant is an admitted request's units, until the test gives them back.
type held struct {
	at, due int64 // granted at; given back at due (0: kept)
	cost    int
}

// TestReleaseMatchesOracle drives policies with random arrivals, and gives back about half
// of the admitted requests at random later times (as a handler's status would), often
// after later grants landed: the engine must answer exactly as an oracle that holds every
// grant not given back (exact rates), or strictly and promptly within a granule (bounded
// rates), and what stays counted must never exceed a rate in any interval.
func TestReleaseMatchesOracle(t *testing.T) {
	policies := []*core.Policy{
		mustPolicy(core.Rate{Count: 1, Period: time.Second}),
		mustPolicy(core.Rate{Count: 5, Period: time.Minute}),
		mustPolicy(core.Rate{Count: 5, Period: 200 * time.Millisecond}, core.Rate{Count: 12, Period: time.Second}),
		mustPolicy(core.Rate{Count: 10, Period: time.Second}, core.Rate{Count: 4, Period: 300 * time.Millisecond}, core.Rate{Count: 30, Period: 5 * time.Second}),
		mustPolicy(core.Rate{Count: bounds.LargestExact, Period: time.Second}),
		mustPolicy(core.Rate{Count: 1000, Period: 100 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 5, Period: 50 * time.Millisecond}, core.Rate{Count: 500, Period: time.Second}),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, p := range policies {
		bounded := false
		for _, r := range p.Rates() {
			bounded = bounded || !r.Exact()
		}
		for _, pattern := range patterns {
			t.Run(fmt.Sprintf("%s/%s", p, pattern), func(t *testing.T) {
				checkReleases(t, rng, p, pattern, bounded)
			})
		}
	}
}

func checkReleases(t *testing.T, rng *rand.Rand, p *core.Policy, pattern string, bounded bool) {
	shortest, longest := p.Rates()[0].Period, p.Rates()[0].Period
	maxCost := p.Rates()[0].Count
	for _, r := range p.Rates() {
		shortest, longest = min(shortest, r.Period), max(longest, r.Period)
		maxCost = min(maxCost, r.Count)
	}
	maxCost = min(maxCost, 3)
	gran := func(r core.Rate) int64 {
		if r.Exact() {
			return 0
		}
		return (int64(r.Period) + bounds.Buckets - 1) / bounds.Buckets
	}
	state := p.NewState()
	var grants []*held // admitted, in order; given back ones leave
	var kept []int64   // units of grants never given back, for the final check
	released, late := 0, 0
	giveBack := func(upTo int64) {
		for {
			i := slices.IndexFunc(grants, func(g *held) bool { return g.due != 0 && g.due <= upTo })
			if i < 0 {
				return
			}
			g := grants[i]
			if slices.ContainsFunc(grants[i+1:], func(x *held) bool { return x.at > g.at }) {
				late++ // later grants landed meanwhile
			}
			p.Release(state, g.at, g.cost)
			grants = slices.Delete(grants, i, i+1)
			released++
		}
	}
	inWindow := func(at int64, T time.Duration) int {
		n := 0
		for _, g := range grants {
			if g.at > at-int64(T) && g.at <= at {
				n += g.cost
			}
		}
		return n
	}
	admits := func(at int64, cost int, slack func(core.Rate) int64) bool {
		for _, r := range p.Rates() {
			if inWindow(at, r.Period+time.Duration(slack(r)))+cost > r.Count {
				return false
			}
		}
		return true
	}
	admitted := 0
	for i, at := range arrivals(rng, pattern, shortest, 1500) {
		giveBack(at)
		cost := 1 + rng.IntN(maxCost)
		strict := admits(at, cost, func(core.Rate) int64 { return 0 })
		prompt := admits(at, cost, gran)
		d, err := p.Apply(state, at, cost, core.Enforce)
		if err != nil {
			t.Fatal(err)
		}
		if !bounded && d.Allowed != strict {
			t.Fatalf("request %d at %d cost %d: engine Allowed=%v, oracle %v", i, at, cost, d.Allowed, strict)
		}
		if d.Allowed && !strict {
			t.Fatalf("request %d at %d: admitted beyond the limit", i, at)
		}
		if prompt && !d.Allowed {
			t.Fatalf("request %d at %d: refused although it fits even with a window one granule longer", i, at)
		}
		if !d.Allowed {
			continue
		}
		admitted++
		if d.Grant != at {
			t.Fatalf("request %d at %d: Grant %d", i, at, d.Grant)
		}
		g := &held{at: d.Grant, cost: cost}
		if rng.IntN(2) == 0 {
			g.due = at + rng.Int64N(2*int64(longest))
		}
		grants = append(grants, g)
	}
	giveBack(1 << 62)
	for _, g := range grants {
		for range g.cost {
			kept = append(kept, g.at)
		}
	}
	for _, r := range p.Rates() {
		if worst := maxInAnyWindow(kept, r.Period); worst > r.Count {
			t.Fatalf("%d counted in one %v interval, limit %d", worst, r.Period, r.Count)
		}
	}
	if admitted == 0 || released == 0 || late == 0 {
		t.Fatalf("admitted %d, released %d, %d of them after later grants: the test tested little", admitted, released, late)
	}
}

// TestReleaseOfAGrantGoneIsANoOp: a grant that left its window and was overwritten, or a
// release of a time never granted, changes nothing.
func TestReleaseOfAGrantGoneIsANoOp(t *testing.T) {
	p := mustPolicy(core.Rate{Count: 2, Period: time.Second})
	s := p.NewState()
	sec := int64(time.Second)
	for _, at := range []int64{0, 1, 2 * sec, 2*sec + 1} {
		if d, _ := p.Apply(s, at, 1, core.Enforce); !d.Allowed {
			t.Fatalf("at %d refused", at)
		}
	}
	before := slices.Clone(s)
	p.Release(s, 0, 1)     // overwritten by the grants at 2s
	p.Release(s, 5, 1)     // never granted
	p.Release(s, 3*sec, 1) // in the future
	if !slices.Equal(s, before) {
		t.Fatalf("state changed: %v, was %v", s, before)
	}
	p.Release(s, 2*sec, 1)
	if d, _ := p.Apply(s, 2*sec+2, 1, core.Peek); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after giving back one of two: %+v", d)
	}
}

// TestCountWhenNeedsAReleaser: a limit that counts by outcome refuses, at registration, a
// store that cannot give grants back and the penalty mode, naming the fix.
func TestCountWhenNeedsAReleaser(t *testing.T) {
	for _, tc := range []struct {
		opts []core.Option
		want string
	}{
		{[]core.Option{core.WithCountWhen(nil)}, "WithCountWhen(nil)"},
		{[]core.Option{core.WithCountWhen(core.Failed), core.WithStore(decideOnly{})}, "cannot give a grant back"},
		{[]core.Option{core.WithCountWhen(core.Failed), core.WithPenalty()}, "WithPenalty"},
	} {
		_, err := adapter.New(3, time.Minute, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one that says %q", err, tc.want)
		}
	}
}

// decideOnly is a Store without Release.
type decideOnly struct{}

func (decideOnly) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("not used")
}
