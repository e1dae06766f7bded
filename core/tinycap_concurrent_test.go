package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

type oracleSpan struct {
	before, after time.Time
	cost          int
}

// TestConcurrentTinyCap: 8 goroutines on 3 keys of a store holding 1 or 2 keys, sweeping
// after every decision, with costs and give-backs (some right away, some by another
// goroutine later), on the real clock. What stays counted (grants not given
// back) must never put more than a rate's count of whole call spans in an interval of length T.
func TestConcurrentTinyCap(t *testing.T) {
	for _, pol := range []string{"3/20ms", "2/10ms,5/50ms", "300/50ms", "3/20ms,300/100ms", "257/30ms,256/30ms"} {
		for _, mk := range []int{1, 2, 0} {
			t.Run(fmt.Sprintf("%s/max%d", pol, mk), func(t *testing.T) { oracleConcurrent(t, pol, mk) })
		}
	}
}

func oracleConcurrent(t *testing.T, pol string, maxKeys int) {
	p, err := core.ParsePolicy(pol)
	if err != nil {
		t.Fatal(err)
	}
	s := core.NewMemoryStore(&core.MemoryConfig{MaxKeys: maxKeys, SweepInterval: -1, Now: time.Now})
	minCount := p.Rates()[0].Count
	for _, r := range p.Rates() {
		minCount = min(minCount, r.Count)
	}
	keys := []string{"a", "b", "c"}
	if maxKeys == 2 {
		for i := range 17 {
			keys = append(keys, fmt.Sprint("k", i))
		}
	}
	var mu sync.Mutex
	kept := map[string]map[*oracleSpan]bool{}
	for _, k := range keys {
		kept[k] = map[*oracleSpan]bool{}
	}
	type rel struct {
		q     core.Query
		grant int64
		sp    *oracleSpan
	}
	relCh := make(chan rel, 1024)
	ctx := context.Background()
	var wg sync.WaitGroup
	deadline := time.Now().Add(150 * time.Millisecond)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for time.Now().Before(deadline) {
				select {
				case r := <-relCh:
					mu.Lock()
					delete(kept[r.q.Key], r.sp) // before the release: it may be counted only less
					mu.Unlock()
					s.Release(ctx, r.q, r.grant)
					continue
				default:
				}
				key := keys[rng.IntN(len(keys))]
				cost := 1 + rng.IntN(min(minCount, 3))
				q := core.Query{Policy: p, Scope: "x", Key: key, Cost: cost}
				before := time.Now()
				d, err := s.Decide(ctx, q)
				after := time.Now()
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					continue
				}
				sp := &oracleSpan{before, after, cost}
				mu.Lock()
				kept[key][sp] = true
				mu.Unlock()
				switch rng.IntN(4) {
				case 0: // given back now
					mu.Lock()
					delete(kept[key], sp)
					mu.Unlock()
					s.Release(ctx, q, d.Grant)
				case 1:
					select {
					case relCh <- rel{q, d.Grant, sp}:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, k := range keys {
		var sps []*oracleSpan
		for sp := range kept[k] {
			sps = append(sps, sp)
		}
		for _, r := range p.Rates() {
			for _, a := range sps {
				n := 0
				for _, b := range sps {
					if !b.before.Before(a.before) && b.after.Before(a.before.Add(r.Period)) {
						n += b.cost
					}
				}
				if n > r.Count {
					t.Fatalf("key %s: %d units of whole call spans within [%v, +%v) for %v", k, n, a.before.Format(time.StampNano), r.Period, r)
				}
			}
		}
	}
}
