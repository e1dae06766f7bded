package core_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Found in review: a key granted in the overflow bucket while the store was full must not
// get a fresh quota when room returns and it gets an entry of its own.
func TestOverflowGrantsFollowTheKey(t *testing.T) {
	s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: 2, SweepInterval: 1 << 62})
	p := mustPolicy(core.Rate{Count: 1, Period: 10 * time.Second})
	sec := int64(time.Second)
	allowed := func(k string, now int64) bool {
		d, err := s.DecideAt(core.Query{Policy: p, Key: k}, now)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	allowed("A", 0)
	allowed("C", 0) // full
	if !allowed("B", 5*sec) {
		t.Fatal("B was refused in the overflow bucket, which had room")
	}
	if allowed("B", 10*sec) { // A and C idle now: B gets an entry of its own
		t.Fatal("B admitted twice within 10s under 1/10s: its overflow grant was forgotten")
	}
	if !allowed("B", 15*sec) {
		t.Fatal("B refused once its overflow grant left the window")
	}
}

// Found in review: a decision whose clock reading predates a sweep must not be recorded
// before it, also when the key's entry exists but holds no grant (made by a Peek).
func TestStaleClockAfterSweep(t *testing.T) {
	s := core.NewMemoryStore(&core.MemoryConfig{SweepInterval: 5 * time.Second})
	p := mustPolicy(core.Rate{Count: 1, Period: 10 * time.Second})
	sec := int64(time.Second)
	q := core.Query{Policy: p, Key: "K"}
	peek := core.Query{Policy: p, Key: "K", Mode: core.Peek}
	s.DecideAt(q, 1*sec)     // a grant
	s.DecideAt(peek, 12*sec) // the sweep at 12s drops K
	s.DecideAt(peek, 12*sec) // an empty entry for K
	d1, _ := s.DecideAt(q, 5*sec)
	d2, _ := s.DecideAt(q, 15*sec)
	if d1.Allowed && d2.Allowed {
		t.Fatal("two grants 3s apart under 1/10s: the stale reading was recorded before the sweep")
	}
	// A cost that is too high fails before any entry is made.
	if _, err := s.DecideAt(core.Query{Policy: p, Key: "new", Cost: 2}, 16*sec); !errors.Is(err, core.ErrCostTooHigh) {
		t.Fatalf("cost 2 of 1: %v", err)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("%d keys held, want 1: the refused cost made an entry", n)
	}
}

// Found in review: the overflow bucket is one per policy (not per shard, not per scope),
// and the cap bounds the store whatever the scopes.
func TestCapHoldsAcrossScopesAndShards(t *testing.T) {
	s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: 1})
	p := mustPolicy(core.Rate{Count: 1, Period: time.Hour})
	admitted := 0
	for i := range 10_000 {
		d, err := s.Decide(context.Background(), core.Query{Policy: p, Scope: fmt.Sprint("/nope/", i), Key: fmt.Sprint("client-", i)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 { // the first key in its own entry, then one grant in the shared overflow
		t.Fatalf("%d admitted, want 2", admitted)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("store holds %d keys with WithMaxKeys(1)", n)
	}
}

// Found in review: periods so long that time arithmetic would overflow are refused, at
// registration, never by a panic.
func TestPeriodBounds(t *testing.T) {
	for _, T := range []time.Duration{core.MaxPeriodForTest + 1, math.MaxInt64 - 5, math.MaxInt64} {
		if _, err := adapter.New(1, T); !errors.Is(err, core.ErrBadPolicy) {
			t.Fatalf("period %d: err %v, want ErrBadPolicy", T, err)
		}
	}
	p := mustPolicy(core.Rate{Count: 1, Period: core.MaxPeriodForTest})
	s := core.NewMemoryStore(nil)
	sec := int64(time.Second)
	d1, _ := s.DecideAt(core.Query{Policy: p, Key: "k"}, sec)
	d2, _ := s.DecideAt(core.Query{Policy: p, Key: "k"}, 2*sec)
	if !d1.Allowed || d2.Allowed || d2.RetryAfter != core.MaxPeriodForTest-time.Second || d1.Reset != core.MaxPeriodForTest {
		t.Fatalf("1 per MaxPeriod: %+v then %+v", d1, d2)
	}
	if _, err := adapter.New(1, core.MaxPeriodForTest); err != nil {
		t.Fatal(err)
	}
}

// MaxKeys holds when newcomers arrive together: each checked the count under its own
// shard's lock only, so newcomers in different shards all saw room and got an entry.
func TestMaxKeysHoldsUnderConcurrentNewcomers(t *testing.T) {
	// Twenty bounded rates: an entry of about 17 KB, whose making widens the gap between a
	// newcomer's look at the count and its increment, as a loaded machine would.
	var rates []core.Rate
	for i := range 20 {
		rates = append(rates, core.Rate{Count: 1000 + i, Period: time.Hour})
	}
	p := mustPolicy(rates...)
	worst, trials := 0, 300
	if testing.Short() {
		trials = 30
	}
	for trial := range trials {
		s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: 4, SweepInterval: time.Hour})
		const n = 64
		var start, done sync.WaitGroup
		start.Add(1)
		for g := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				s.Decide(context.Background(), core.Query{Policy: p, Key: fmt.Sprint("client-", trial, "-", g)})
			}()
		}
		start.Done()
		done.Wait()
		worst = max(worst, s.Len())
	}
	if worst > 4 {
		t.Fatalf("MaxKeys 4: a store held %d keys after 64 distinct newcomers arrived together", worst)
	}
}
