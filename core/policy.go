package core

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reqlimit/reqlimit/internal/bounds"
)

// A Policy is one or more rates enforced together on a key: a request is admitted only if
// every rate has room, and recorded in all. Policies are immutable; two with the same text
// share buckets.
type Policy struct {
	rates []Rate
	text  string

	// Layout of a key's state, shared by every store that keeps state in int64 slots.
	logLen       int           // exact log capacity: the largest exact Count, 0 if none
	minCount     int           // the smallest Count: costs up to it fit every rate
	longest      time.Duration // the longest Period: a key idle this long holds nothing
	longestExact time.Duration // the longest Period among exact rates: how long the log counts
	bounded      []int         // indexes into rates of the bounded ones
	gran         []int64       // per rate: the bounded form's granule, 0 for exact rates
	offset       []int         // per rate: where a bounded rate's block starts in the state, 0 for exact rates
	stateLen     int

	// salt is the registering limit's ident, hashed (see limiter.ident): it sets the limit's
	// buckets apart in a MemoryStore, as the ident does in other stores' scopes. 0 under
	// WithScope and for a policy an application made.
	salt uint64
	memo atomic.Pointer[keyTable] // the table of the MemoryStore this policy was last decided in
}

// NewPolicy returns the policy enforcing all of rates, in the order given: counts from 1
// to min(1e13, math.MaxInt). Unlike limits and ParsePolicy, it accepts periods below
// 1 ms, for simulations and stores' tests.
func NewPolicy(rates ...Rate) (*Policy, error) {
	if len(rates) == 0 {
		return nil, fmt.Errorf("no rate given: %w", ErrBadPolicy)
	}
	p := &Policy{rates: append([]Rate(nil), rates...), minCount: rates[0].Count,
		gran: make([]int64, len(rates)), offset: make([]int, len(rates))}
	texts := make([]string, len(rates))
	for i, r := range rates {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("rate %d (%d per %v): %w", i+1, r.Count, r.Period, err)
		}
		if j := slices.Index(rates[:i], r); j >= 0 {
			// Harmless to the limit, but a slip in configuration, and two RateLimit
			// members of one name would leave a client unable to tell them apart.
			return nil, fmt.Errorf("rate %d (%v) repeats rate %d: give each rate once: %w", i+1, r, j+1, ErrBadPolicy)
		}
		texts[i] = r.String()
		if r.exact() {
			p.logLen = max(p.logLen, r.Count)
			p.longestExact = max(p.longestExact, r.Period)
		} else {
			p.bounded = append(p.bounded, i)
			p.gran[i] = granule(r)
		}
		p.minCount = min(p.minCount, r.Count)
		p.longest = max(p.longest, r.Period)
	}
	p.text = strings.Join(texts, ",")
	for j, i := range p.bounded {
		p.offset[i] = 1 + p.logLen + j*boundedLen
	}
	p.stateLen = 1 + p.logLen + len(p.bounded)*boundedLen
	return p, nil
}

// ParsePolicy reads a policy's text form: rates "COUNT/PERIOD" separated by commas, such as
// "3/1m" or "500/2s,2000/10s". A period is a Go duration ("1m", ".5s"), days ("1d") or a
// bare unit ("s"), at least 1 ms. Errors name the bad item and its offset.
func ParsePolicy(text string) (*Policy, error) {
	p, err := parsePolicy(text)
	if err != nil {
		return nil, err
	}
	if err := p.checkFloor(len(p.rates)); err != nil {
		return nil, fmt.Errorf("policy %q: %w", text, err)
	}
	return p, nil
}

// parsePolicy is ParsePolicy without the bounds.ShortestPeriod floor, which limits built
// with WithShortPeriods do without.
func parsePolicy(text string) (*Policy, error) {
	var rates []Rate
	off := 0
	for _, item := range strings.Split(text, ",") {
		r, err := parseRate(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("policy %q: at offset %d, %q: %v: %w", text, off, item, err, ErrBadPolicy)
		}
		rates = append(rates, r)
		off += len(item) + 1
	}
	p, err := NewPolicy(rates...)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", text, err)
	}
	return p, nil
}

// checkFloor refuses a period below bounds.ShortestPeriod. The first text rates were read
// from a policy's text; a period from Go code may be a bare number, which is nanoseconds.
func (p *Policy) checkFloor(text int) error {
	for i, r := range p.rates {
		if r.Period >= bounds.ShortestPeriod {
			continue
		}
		hint := ""
		if i >= text {
			hint = fmt.Sprintf("a bare number is nanoseconds: write the unit, as in %d*time.Second; ", int64(r.Period))
		}
		return fmt.Errorf("rate %d (%d per %v): period %v is below the %v minimum (%sWithShortPeriods allows shorter periods): %w",
			i+1, r.Count, r.Period, r.Period, bounds.ShortestPeriod, hint, ErrBadPolicy)
	}
	return nil
}

func parseRate(s string) (Rate, error) {
	count, period, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, fmt.Errorf("want COUNT/PERIOD, such as 3/1m")
	}
	text := strings.TrimSpace(count)
	n, ok := new(big.Int).SetString(text, 10)
	switch {
	case !ok:
		return Rate{}, fmt.Errorf("bad count %q: want a whole number such as 3 or 1000000000", count)
	case n.Cmp(big.NewInt(bounds.LargestCount)) > 0:
		return Rate{}, aboveLargest(text)
	case n.Cmp(big.NewInt(math.MinInt)) < 0:
		return Rate{}, belowOne(text) // what validate says of other counts below 1, which an int holds
	case n.Int64() > math.MaxInt:
		// A 32-bit platform: a count this large cannot be given as a Rate's int.
		return Rate{}, fmt.Errorf("count %d is above the largest an int holds on this platform, %d: give a smaller count over a shorter period, or build for 64 bits", n, math.MaxInt)
	}
	d, err := parsePeriod(strings.TrimSpace(period))
	if err != nil {
		return Rate{}, err
	}
	return Rate{Count: int(n.Int64()), Period: d}, nil
}

// Rates returns a copy of the policy's rates, in the order given.
func (p *Policy) Rates() []Rate { return append([]Rate(nil), p.rates...) }

func (p *Policy) indexOf(r Rate) int { return slices.Index(p.rates, r) }

// String returns the canonical text form, which ParsePolicy reads back.
func (p *Policy) String() string { return p.text }
