package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// From the defects issue: a new key at the key cap made its decision sweep its whole shard
// under the shard's lock (and every 100 ms the whole store), so a flood of distinct keys
// slowed every decision. Here each decision at the cap examines at most two sweep steps of
// entries, however full the shards; an idle key anywhere in the store is still found by the
// newcomers' sweeping within one round of the shards, and gives a newcomer its room; live
// keys are never dropped and stay strictly limited, and newcomers share the overflow
// bucket's one quota, which follows the newcomer that gets an entry.
func TestNewKeyAtCapIsBounded(t *testing.T) {
	const maxKeys = 64 * 256 // hundreds of entries a shard: a whole-shard sweep shows
	// Newcomers do all the sweeping: the periodic sweep never comes round.
	s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: maxKeys, SweepInterval: 1 << 62})
	var examined int
	core.CountSweptEntries(s, &examined)
	p := mustPolicy(core.Rate{Count: 1, Period: time.Minute})
	sec := int64(time.Second)
	decide := func(key string, now int64) bool {
		t.Helper()
		examined = 0
		d, err := s.DecideAt(core.Query{Policy: p, Key: key}, now)
		if err != nil {
			t.Fatal(err)
		}
		if examined > 2*core.SweepChunk {
			t.Fatalf("deciding %s at %v examined %d entries for idle keys, want at most %d",
				key, time.Duration(now), examined, 2*core.SweepChunk)
		}
		return d.Allowed
	}
	held := func(key string) bool { return core.HoldsKey(s, p, "", key) }

	decide("lonely", 0) // idle from 60s; the others from 90s
	for i := range maxKeys - 1 {
		decide(fmt.Sprint("live-", i), 30*sec)
	}
	if n := s.Len(); n != maxKeys {
		t.Fatalf("filled %d keys, want %d", n, maxKeys)
	}

	admitted := 0
	for i := range 1000 {
		k := fmt.Sprint("early-", i)
		if decide(k, 30*sec) {
			admitted++
		}
		if held(k) {
			t.Fatalf("newcomer %s got an entry while every key was live", k)
		}
	}
	if admitted != 1 {
		t.Fatalf("%d of 1000 newcomers admitted at the cap, want 1: the overflow bucket's quota", admitted)
	}

	// At 61s only lonely is idle. The round reaches every entry within one pass over all of
	// them, plus the part of the shard it was on that it passed before lonely went idle.
	total, most := core.EntryCount(s)
	bound := (total+most)/core.SweepChunk + 2*64
	roomFor := ""
	for i := 0; i < bound && roomFor == ""; i++ {
		k := fmt.Sprint("late-", i)
		// In the overflow bucket or in an entry of its own, which inherits that bucket's
		// history: either way the grant there at 30s still counts.
		if decide(k, 61*sec) {
			t.Fatalf("newcomer %s admitted at 61s: the overflow bucket's grant at 30s was forgotten", k)
		}
		if held(k) {
			roomFor = k
		}
	}
	if roomFor == "" {
		t.Fatalf("no newcomer found the idle key's room within %d newcomers", bound)
	}
	t.Logf("the idle key's room went to %s (bound %d newcomers)", roomFor, bound)
	if held("lonely") || s.Len() != maxKeys {
		t.Fatalf("lonely held %v, %d keys held: want lonely dropped, %s in its place, %d keys",
			held("lonely"), s.Len(), roomFor, maxKeys)
	}
	for i := range maxKeys - 1 {
		k := fmt.Sprint("live-", i)
		if !held(k) {
			t.Fatalf("live key %s was dropped", k)
		}
		if decide(k, 61*sec) {
			t.Fatalf("live key %s admitted twice within a minute", k)
		}
	}
	for i := range 100 {
		if k := fmt.Sprint("later-", i); decide(k, 61*sec) || held(k) {
			t.Fatalf("newcomer %s admitted or given an entry in a store full of live keys", k)
		}
	}

	// Once every key is idle, room returns for newcomers, with their own strict quota.
	roomFor = ""
	for i := 0; i < bound && roomFor == ""; i++ {
		k := fmt.Sprint("after-", i)
		if !decide(k, 200*sec) {
			t.Fatalf("newcomer %s refused once every key was idle", k)
		}
		if held(k) {
			roomFor = k
		}
	}
	if roomFor == "" {
		t.Fatalf("no newcomer got an entry within %d newcomers once every key was idle", bound)
	}
	if decide(roomFor, 201*sec) {
		t.Fatalf("%s admitted twice within a minute in its own entry", roomFor)
	}
}

// The periodic sweep is spread over a shard's decisions, one step each, rather than a whole
// shard swept inside one request: each decision examines at most one step of entries, each
// shard's pass still drops every idle key it holds, and SweepNow still drops them all at once.
func TestPeriodicSweepIsBounded(t *testing.T) {
	clock := storetest.NewManualClock(time.Unix(0, 0))
	s := core.NewMemoryStore(&core.MemoryConfig{Now: clock.Now, SweepInterval: time.Second})
	var examined int
	core.CountSweptEntries(s, &examined)
	p := mustPolicy(core.Rate{Count: 1, Period: time.Second})
	sec := int64(time.Second)
	const n = 64 * 256
	for i := range n {
		s.DecideAt(core.Query{Policy: p, Key: fmt.Sprint("idle-", i)}, 0)
	}
	if examined != 0 {
		t.Fatalf("%d entries examined before any sweep was due", examined)
	}
	// One probe key in every shard, to drive that shard's sweep.
	probes := make([]string, 64)
	for i, found := 0, 0; found < len(probes); i++ {
		k := fmt.Sprint("probe-", i)
		if sh := core.ShardOf(s, p, "", k); probes[sh] == "" {
			probes[sh], found = k, found+1
		}
	}
	// A probe's insertion may grow its shard once before the pass begins.
	_, most := core.EntryCount(s)
	bound := 2*most/core.SweepChunk + 1
	rounds := 0
	for s.Len() > len(probes) {
		if rounds++; rounds > bound {
			t.Fatalf("%d idle keys left after %d decisions in every shard", s.Len()-len(probes), bound)
		}
		for _, k := range probes {
			examined = 0
			d, err := s.DecideAt(core.Query{Policy: p, Key: k}, 2*sec)
			if err != nil {
				t.Fatal(err)
			}
			if examined > core.SweepChunk {
				t.Fatalf("a decision examined %d entries for idle keys, want at most %d", examined, core.SweepChunk)
			}
			if d.Allowed != (rounds == 1) {
				t.Fatalf("probe %s in round %d: allowed %v under 1 per second", k, rounds, d.Allowed)
			}
		}
	}
	for _, k := range probes {
		if !core.HoldsKey(s, p, "", k) {
			t.Fatalf("live probe %s was dropped", k)
		}
	}
	clock.Advance(4 * time.Second) // SweepNow reads the store's clock
	core.SweepNow(s)
	if n := s.Len(); n != 0 {
		t.Fatalf("%d keys left after SweepNow with every key idle", n)
	}
}
