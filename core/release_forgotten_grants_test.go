package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// An exact rate's log holds the last N grants: a grant admitted once the oldest has left
// the window takes its place. Giving that newest grant back (WithCountWhen) must not free
// the place of the one it overwrote for a decision whose clock reads earlier, when the
// overwritten grant was still in the window: a request that read the clock before a
// racing one took the key's lock, or a clock stepped back. It freed it: N+1 grants in one
// interval of length T.
func TestGivingBackTheNewestGrantKeepsTheOnesItOverwroteCounted(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clock := storetest.NewManualClock(start)
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now})
	ctx := context.Background()
	q := core.Query{Policy: mustParse("3/1s"), Key: "alice"}
	at := func(d time.Duration) core.Decision {
		t.Helper()
		clock.Advance(start.Add(d).Sub(clock.Now()))
		dec, err := s.Decide(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return dec
	}
	for _, d := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if dec := at(d); !dec.Allowed {
			t.Fatalf("grant at %v refused: %+v", d, dec)
		}
	}
	// The grant at 0 has left the window: this one takes its place in the log, and its
	// response gives it back.
	late := at(1150 * time.Millisecond)
	if !late.Allowed {
		t.Fatalf("grant at 1.15s refused: %+v", late)
	}
	if err := s.Release(ctx, q, late.Grant); err != nil {
		t.Fatal(err)
	}
	// A decision whose clock reads 950ms: (-50ms, 950ms] holds the grants at 0, 100ms and
	// 200ms, all three still counted.
	if dec := at(950 * time.Millisecond); dec.Allowed {
		t.Fatalf("at 950ms, with the grants at 0, 100ms and 200ms in (-50ms, 950ms], a fourth was admitted for 3/1s: %+v", dec)
	}
	// From the given-back grant's time on, the place is free again.
	if dec := at(1150 * time.Millisecond); !dec.Allowed {
		t.Fatalf("at 1.15s the grant at 0 has left the window and the one at 1.15s was given back, yet refused: %+v", dec)
	}
}
