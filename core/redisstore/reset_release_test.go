package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// Giving back a grant that a Reset already forgot changes nothing. release.lua finds the
// grant by its time: the bucket of that time for a bounded rate (T/100 wide), the unit for
// the compact layout, the microsecond for the exact ring. After a Reset (then a DEL),
// grants recorded later in the same bucket or unit were taken for the forgotten one, and
// one of them given back: one request more than the count admitted in a window.
func TestReleaseAfterReset(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	for _, c := range []struct {
		text    string
		compact bool
		step    time.Duration
	}{
		{"300/1h", false, 10 * time.Millisecond},       // bounded: a bucket is 36 s
		{"5/15m", true, time.Millisecond},              // compact: a unit is 50 ms
		{"5/15m", false, 0},                            // exact: the same microsecond
		{"2/1s,300/1h", false, 600 * time.Millisecond}, // mixed (decide.lua): its bounded rate
		{"300/1h", false, -1},                          // the server's clock (TIME), not a test clock's
	} {
		name := c.text + map[bool]string{true: "/compact", false: ""}[c.compact] + map[bool]string{true: "/server-clock", false: ""}[c.step < 0]
		t.Run(name, func(t *testing.T) {
			// Off a unit's edge (as the server's clock nearly always is).
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, int64(time.Millisecond)))
			opts := []redisstore.Option{roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithCompact(c.compact)}
			if c.step >= 0 {
				opts = append(opts, redisstore.WithClock(clock.Now))
			}
			s := redisstore.New(newClient(t, standalone), opts...)
			p := mustParse(c.text)
			q := core.Query{Policy: p, Scope: "login", Key: "alice"}
			n := p.Rates()[len(p.Rates())-1].Count
			first, err := s.Decide(ctx, q)
			if err != nil || !first.Allowed {
				t.Fatalf("first: %+v %v", first, err)
			}
			clock.Advance(max(c.step, 0))
			if err := s.Reset(ctx, q); err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for range n + 1 {
				clock.Advance(max(c.step, 0))
				if d, err := s.Decide(ctx, q); err != nil {
					t.Fatal(err)
				} else if d.Allowed {
					admitted++
				}
				if admitted == n {
					break
				}
			}
			if admitted != n {
				t.Fatalf("%d admitted after the reset, want %d", admitted, n)
			}
			// The first grant was forgotten by the reset: giving it back changes nothing.
			if err := s.Release(ctx, q, first.Grant); err != nil {
				t.Fatal(err)
			}
			clock.Advance(max(c.step, 0))
			if d, _ := s.Decide(ctx, q); d.Allowed {
				t.Fatalf("%v: %d grants after the reset, then one more admitted within the window: giving back the grant the reset forgot took one made after it (%+v)", p, n, d)
			}
		})
	}
}

// A reset of a key that holds nothing writes no fence: nothing could be taken for one of
// its grants, and a fence per such reset would only take memory.
func TestResetOfAnAbsentKeyLeavesNoFence(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	c := newClient(t, standalone)
	prefix := freshPrefix(t)
	s := redisstore.New(c, roomy, redisstore.WithPrefix(prefix))
	q := core.Query{Policy: mustParse("3/1m"), Key: "never-seen"}
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("after resetting an absent key: keys %q %v, want none", keys, err)
	}
	if _, err := s.Decide(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, q); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 1 || !strings.HasSuffix(keys[0], ":reset") {
		t.Fatalf("after resetting a used key: keys %q %v, want its fence alone", keys, err)
	}
}
