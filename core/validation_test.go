package core_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/bounds"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// A period written as a bare number is nanoseconds: refused everywhere a limit is declared,
// with the value, the floor and the fix named; windows people use stay accepted.
func TestPeriodFloor(t *testing.T) {
	for _, build := range []struct {
		name string
		f    func() error
		code bool // the period came from Go code, where a bare number is a likely slip
	}{
		{"NewLimiter(3, 60)", func() error { _, err := adapter.New(3, 60); return err }, true},
		{"NewLimiter(3, time.Nanosecond)", func() error { _, err := adapter.New(3, time.Nanosecond); return err }, true},
		{"NewLimiter with WithRate(5, 60)", func() error { _, err := adapter.New(3, time.Minute, core.WithRate(5, 60)); return err }, true},
		{"NewCounter over 60ns", func() error { _, err := core.NewCounter("c", 3, 60, nil); return err }, true},
		// Text has its unit written: the bare-number hint would be wrong there
		// ("3/500us" is not 500000*time.Second).
		{`ParsePolicy("3/60ns")`, func() error { _, err := core.ParsePolicy("3/60ns"); return err }, false},
		{`ParseLimiter("3/1m,3/500us")`, func() error { _, err := adapter.Parse("3/1m,3/500us"); return err }, false},
		{`NewLimiter with WithTiers("3/500us")`, func() error {
			_, err := adapter.New(3, time.Minute, core.WithTiers(func(core.Request) string { return "" }, map[string]string{"t": "3/500us"}))
			return err
		}, false},
	} {
		err := build.f()
		if !errors.Is(err, core.ErrBadPolicy) {
			t.Errorf("%s: %v, want ErrBadPolicy", build.name, err)
			continue
		}
		for _, part := range []string{"s is below the 1ms minimum", "WithShortPeriods"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: %q does not say %q", build.name, err, part)
			}
		}
		if hint := strings.Contains(err.Error(), "*time.Second"); hint != build.code {
			t.Errorf("%s: %q; want the bare-number hint %v", build.name, err, build.code)
		}
	}
	for _, ok := range []string{"20/50ms", "5/10ms", "3/1ms", "10/.5s"} {
		if _, err := adapter.Parse(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if _, err := adapter.Parse("100/100us", core.WithShortPeriods()); err != nil {
		t.Errorf("100/100us with WithShortPeriods: %v", err)
	}
	if _, err := adapter.New(100, 100*time.Microsecond, core.WithShortPeriods()); err != nil {
		t.Errorf("100 per 100µs with WithShortPeriods: %v", err)
	}
}

// A period starting with a dot is a number, as time.ParseDuration reads it: never a digit
// added in front of it.
func TestPeriodWithLeadingDot(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10/.5s": 500 * time.Millisecond, "3/.5m": 30 * time.Second, "3/s": time.Second,
		"3/ms": time.Millisecond, "3/1.5s": 1500 * time.Millisecond, "3/h": time.Hour, "3/d": 24 * time.Hour,
	} {
		p, err := core.ParsePolicy(in)
		if err != nil || p.Rates()[0].Period != want {
			t.Errorf("%s: %v %v, want period %v", in, p, err, want)
		}
	}
	for _, bad := range []string{"3/.s", "3/.", "3/-1s", "3/+1s", "3/.d", "3/1.5d"} {
		if p, err := core.ParsePolicy(bad); err == nil {
			t.Errorf("%s parsed as %v", bad, p)
		}
	}
}

// Counts are bounded where RateLimit values and the engine's sums stay exact; the inputs
// that used to panic (a makeslice overflow, an index out of range) are errors or work.
func TestHugeCounts(t *testing.T) {
	for _, bad := range []string{"999999999999999999/1d", "110000000000000/d", "9223372036854775807/1s", "10000000000001/1h", "99999999999999999999/1s"} {
		wantPolicyError(t, bad, "is above the largest, 10000000000000", "")
	}
	for _, good := range []string{"1000000000000/365d", "10000000000000/1d", "10000000000000/36500d", "3/36500d"} {
		l, err := adapter.Parse(good, core.WithStore(core.NewMemoryStore(nil)))
		if count, _, _ := strings.Cut(good, "/"); len(count) > len(strconv.Itoa(math.MaxInt)) {
			// A 32-bit platform: a Rate's int cannot hold the count, which the error says.
			if !errors.Is(err, core.ErrBadPolicy) || !strings.Contains(err.Error(), "above the largest an int holds on this platform") {
				t.Errorf("%s: %v, want ErrBadPolicy naming this platform's int", good, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", good, err)
		}
		for range 3 {
			h := adapter.HeaderMap{}
			v := l.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.0.2.1:1"}, h)
			if !v.Allowed || len(h[hook.HeaderRateLimit]) != 1 {
				t.Fatalf("%s: %+v, fields %v", good, v, h)
			}
		}
	}
	if over := int64(bounds.LargestCount) + 1; over <= math.MaxInt { // not on 32-bit platforms
		_, err := core.NewPolicy(core.Rate{Count: 3, Period: time.Minute}, core.Rate{Count: int(over), Period: time.Hour})
		if !errors.Is(err, core.ErrBadPolicy) {
			t.Errorf("NewPolicy with a count above the largest: %v", err)
		}
	}
}

// Penalty records refusals too. A bounded rate's bucket holds at most its count, so a
// flood of refused requests of the largest cost cannot grow the sum until it overflows
// and admits.
func TestPenaltyCannotOverflow(t *testing.T) {
	p := mustPolicy(core.Rate{Count: bounds.LargestInt, Period: time.Hour})
	s := p.NewState()
	d, err := p.Apply(s, 0, bounds.LargestInt, core.Penalty)
	if err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v", d, err)
	}
	// Enough refusals of the largest cost to pass int64's range without the cap.
	for i := range 1_000_000 {
		d, err := p.Apply(s, int64(i), bounds.LargestInt, core.Penalty)
		if err != nil || d.Allowed {
			t.Fatalf("refusal %d: %+v %v", i, d, err)
		}
	}
	// And the key frees once the hour (and its bucket) has passed.
	d, _ = p.Apply(s, int64(time.Hour+time.Hour/50), 1, core.Enforce)
	if !d.Allowed || d.Remaining != bounds.LargestInt-1 {
		t.Fatalf("an hour later: %+v", d)
	}
}

// Two limits registered in different places with the same policy count apart; one place
// registering again (a router rebuilt) names the same buckets.
func TestRegisteredLimitsCountApart(t *testing.T) {
	store := core.WithStore(core.NewMemoryStore(nil))
	in := adapter.Input{Route: "GET /a", Peer: "192.0.2.1:1"}
	first, _ := adapter.New(2, 7*time.Minute, store)
	second, _ := adapter.New(2, 7*time.Minute, store)
	for i, l := range []adapter.Limiter{first, first, second, second} {
		if v := l.Check(context.Background(), in, nil); !v.Allowed {
			t.Fatalf("request %d refused: the two limits share a bucket", i+1)
		}
	}
	var again []adapter.Limiter
	for range 2 {
		l, _ := adapter.New(3, 7*time.Minute, store) // one site, twice
		again = append(again, l)
	}
	for i, l := range []adapter.Limiter{again[0], again[1], again[0], again[1]} {
		if v := l.Check(context.Background(), in, nil); v.Allowed != (i < 3) {
			t.Fatalf("request %d: allowed %v; one site registering twice must name one bucket", i+1, v.Allowed)
		}
	}
}

// A store that is nil, also as a nil pointer of a store type (created only when
// configured), is refused where it is given: it would pass registration and then fail
// every request with a nil dereference, which no fail mode sees.
func TestNilStoreIsRefusedWhereGiven(t *testing.T) {
	var never *core.MemoryStore
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"WithStore(nil)", func() error { _, err := adapter.New(3, time.Minute, core.WithStore(nil)); return err }(), "WithStore(nil)"},
		{"WithStore of a nil *MemoryStore", func() error { _, err := adapter.New(3, time.Minute, core.WithStore(never)); return err }(), "*core.MemoryStore"},
		{"SetDefaultStore of a nil *MemoryStore", core.SetDefaultStore(never), "*core.MemoryStore"},
		{"NewCounter of a nil *MemoryStore", func() error { _, err := core.NewCounter("c", 3, time.Minute, never); return err }(), "*core.MemoryStore"},
	} {
		if c.err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(c.err.Error(), c.want) || !strings.Contains(c.err.Error(), "store") {
			t.Errorf("%s: %q does not name %s and the store", c.name, c.err, c.want)
		}
	}
}

// The largest count an int holds (on 32-bit platforms, math.MaxInt32) registers and
// answers with its fields: sizing the cache of RateLimit values must not overflow.
func TestLargestIntCountRegisters(t *testing.T) {
	for _, policy := range []string{strconv.Itoa(bounds.LargestInt) + "/1s", strconv.Itoa(bounds.LargestInt) + "/1h"} {
		l, err := adapter.Parse(policy, core.WithStore(core.NewMemoryStore(nil)))
		if err != nil {
			t.Fatalf("%s: %v", policy, err)
		}
		h := adapter.HeaderMap{}
		if v := l.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.0.2.1:1"}, h); !v.Allowed || len(h[hook.HeaderRateLimit]) != 1 {
			t.Fatalf("%s: %+v, fields %v", policy, v, h)
		}
	}
}

// Penalty records refusals, so a bounded rate's sum can reach many times its count (each
// bucket is capped at the count, not the sum). A key far over its limit has none left:
// computed as an int, the sum wrapped past 2^32 on 32-bit platforms into room that is not
// there. One rate and two.
func TestPenaltyFarOverTheLimitLeavesNone(t *testing.T) {
	const count = 1 << 30
	for _, p := range []*core.Policy{
		mustPolicy(core.Rate{Count: count, Period: time.Hour}),
		mustPolicy(core.Rate{Count: count, Period: time.Hour}, core.Rate{Count: count, Period: 2 * time.Hour}),
	} {
		s := p.NewState()
		step := int64(time.Hour / 50) // each decision in a bucket of its own
		for i := range 6 {
			d, err := p.Apply(s, int64(i)*step, count, core.Penalty)
			if err != nil {
				t.Fatalf("%v: %d: %v", p, i, err)
			}
			if i > 0 && (d.Allowed || d.Remaining != 0) {
				t.Errorf("%v: decision %d (%d units recorded): Allowed %v Remaining %d, want refused with 0 left", p, i, int64(i+1)*count, d.Allowed, d.Remaining)
			}
		}
	}
}

// The same through a Counter, which decides in Penalty mode: a counter of a gigabyte an
// hour sent four gigabytes counts at least its capacity.
func TestCounterFarOverItsCapacity(t *testing.T) {
	const capacity = 1 << 30
	clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
	c, err := core.NewCounter("bytes", capacity, time.Hour, core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		n, err := c.Add(context.Background(), "k", capacity)
		if err != nil {
			t.Fatal(err)
		}
		if n < capacity {
			t.Errorf("Add %d (%d units added): count %d, want at least the capacity %d", i+1, int64(i+1)*capacity, n, capacity)
		}
		clock.Advance(time.Hour / 50)
	}
	if n, _ := c.Count(context.Background(), "k"); n < capacity {
		t.Errorf("Count: %d, want at least the capacity %d", n, capacity)
	}
}

// A count below what an int holds (on 32-bit platforms) is refused as below 1, not wrapped
// into a valid one; a count too long for int64 is above the largest or below 1 only when
// it is all digits: otherwise it is no number at all.
func TestCountsBeyondAnIntParseAsTheirSign(t *testing.T) {
	for _, policy := range []string{"-2147483649/1s", "-4294967295/1s", "-6442450943/1m", "-9223372036854775807/1s", "-99999999999999999999/1s"} {
		wantPolicyError(t, policy, "want at least 1", "")
	}
	for _, policy := range []string{"99999999999999999999x/1s", "99999999999999999999 9/1s", "99999999999999999999-1/1s", "-99999999999999999999x/1s"} {
		wantPolicyError(t, policy, "bad count", "above the largest")
	}
}

// wantPolicyError checks that ParsePolicy refuses policy with ErrBadPolicy and an error
// saying want, and not saying not (unless "").
func wantPolicyError(t *testing.T, policy, want, not string) {
	t.Helper()
	_, err := core.ParsePolicy(policy)
	if !errors.Is(err, core.ErrBadPolicy) || !strings.Contains(err.Error(), want) || not != "" && strings.Contains(err.Error(), not) {
		t.Errorf("ParsePolicy(%q): %v, want ErrBadPolicy saying %q, not %q", policy, err, want, not)
	}
}
