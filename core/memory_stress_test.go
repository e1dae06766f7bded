package core_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

type grant struct {
	before, after int64
	cost          int
}

// TestStoreStress: many goroutines, few or many keys, sweeping on every decision, a small
// key cap, a virtual clock. Per key, decisions are serialized by the test (so their order is
// known); the check is conservative: grants i..j whose [before_i, after_j] span is shorter
// than T must fit in N.
func TestStoreStress(t *testing.T) {
	policies := []*core.Policy{
		mustPolicy(core.Rate{Count: 3, Period: 100 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 2, Period: 50 * time.Millisecond}, core.Rate{Count: 5, Period: 200 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 2, Period: 30 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 300, Period: 100 * time.Millisecond}),
		mustPolicy(core.Rate{Count: 4, Period: 40 * time.Millisecond}, core.Rate{Count: 400, Period: 500 * time.Millisecond}),
	}
	maxKeys := 400 // the 5000-key runs fill it: overflow, sweeps and inheritance under load
	if s := os.Getenv("MAXKEYS"); s != "" {
		maxKeys, _ = strconv.Atoi(s)
	}
	for _, nkeys := range []int{4, 50, 5000} {
		for _, withOverflow := range []bool{false, true} {
			name := fmt.Sprintf("keys%d_overflow%v", nkeys, withOverflow)
			t.Run(name, func(t *testing.T) {
				cfg := &core.MemoryConfig{SweepInterval: -1}
				if withOverflow {
					cfg.MaxKeys = maxKeys
				}
				s := core.NewMemoryStore(cfg)
				var clock atomic.Int64
				type keyRec struct {
					mu     sync.Mutex
					grants [][]grant // per policy
				}
				keys := make([]keyRec, nkeys)
				for i := range keys {
					keys[i].grants = make([][]grant, len(policies))
				}
				var wg sync.WaitGroup
				var ops atomic.Int64
				deadline := time.Now().Add(time.Second)
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(g), 99))
						for time.Now().Before(deadline) {
							ki := rng.IntN(nkeys)
							pi := rng.IntN(len(policies))
							p := policies[pi]
							cost := 1 + rng.IntN(2)
							mode := core.Enforce
							if rng.IntN(10) == 0 {
								mode = core.Peek
							}
							k := &keys[ki]
							k.mu.Lock()
							before := clock.Add(rng.Int64N(int64(200 * time.Microsecond)))
							d, err := s.DecideAt(core.Query{Policy: p, Key: "k" + strconv.Itoa(ki), Cost: cost, Mode: mode}, before)
							after := clock.Load()
							if err != nil {
								k.mu.Unlock()
								t.Error(err)
								return
							}
							if d.Allowed && mode == core.Enforce {
								k.grants[pi] = append(k.grants[pi], grant{before, after, cost})
							}
							k.mu.Unlock()
							ops.Add(1)
						}
					}()
				}
				wg.Wait()
				viol := 0
				for ki := range keys {
					for pi, p := range policies {
						gs := keys[ki].grants[pi]
						for _, r := range p.Rates() {
							T := int64(r.Period)
							sum, j := 0, 0
							// two pointers: window of grants i..j with after_j - before_i < T
							for i := range gs {
								if j < i {
									j, sum = i, 0
								}
								for j < len(gs) && gs[j].after-gs[i].before < T {
									sum += gs[j].cost
									j++
								}
								if sum > r.Count {
									if viol < 5 {
										t.Errorf("key %d policy %v rate %v: %d units in grants %d..%d spanning %v", ki, p, r, sum, i, j-1, time.Duration(gs[j-1].after-gs[i].before))
									}
									viol++
								}
								if j > i {
									sum -= gs[i].cost
								}
							}
						}
					}
				}
				_ = sort.Ints
				t.Logf("%d ops, virtual time %v, Len %d, violations %d", ops.Load(), time.Duration(clock.Load()), s.Len(), viol)
			})
		}
	}
}
