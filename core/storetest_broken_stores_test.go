package core_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// logStore is a brute-force store: each bucket keeps, per rate, every grant, and a
// decision counts them. Its flaws, each off by default, are ones a store author could
// make; the conformance suite must fail each.
type logStore struct {
	now func() time.Time
	// sharePolicies keys a bucket by scope and key alone: policies of one route and
	// client share their grants.
	sharePolicies bool
	// exactOnly makes Release and Reset touch only the exact rates (up to 256 per period),
	// leaving a bounded rate's grants counted. The suite's Release catches it on its
	// bounded policies, Reset on a Peek's FullReset.
	exactOnly bool
	// peekAdmits answers every Peek as admitted, as a script that returns early for one.
	peekAdmits bool

	mu      sync.Mutex
	buckets map[string][][]logGrant // per bucket, per rate
}

type logGrant struct {
	at   int64
	cost int
}

func newLogStore(now func() time.Time) *logStore {
	return &logStore{now: now, buckets: map[string][][]logGrant{}}
}

// bucket returns q's grants per rate, made as needed; the caller holds mu.
func (s *logStore) bucket(q core.Query) [][]logGrant {
	name := fmt.Sprintf("%q %q", q.Scope, q.Key)
	if !s.sharePolicies {
		name = q.Policy.String() + " " + name
	}
	b := s.buckets[name]
	for len(b) < len(q.Policy.Rates()) {
		b = append(b, nil)
	}
	s.buckets[name] = b
	return b
}

func used(gs []logGrant, now int64, T time.Duration) int {
	n := 0
	for _, g := range gs {
		if g.at > now-int64(T) && g.at <= now {
			n += g.cost
		}
	}
	return n
}

func (s *logStore) Decide(_ context.Context, q core.Query) (core.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cost, rates := max(q.Cost, 1), q.Policy.Rates()
	for _, r := range rates {
		if cost > r.Count {
			return core.Decision{}, core.ErrCostTooHigh
		}
	}
	now := s.now().UnixNano()
	b := s.bucket(q)
	allowed := true
	for i, r := range rates {
		allowed = allowed && used(b[i], now, r.Period)+cost <= r.Count
	}
	allowed = allowed || s.peekAdmits && q.Mode == core.Peek
	d := core.Decision{Allowed: allowed, Remaining: math.MaxInt, Grant: now}
	if q.Mode == core.Penalty || allowed && q.Mode == core.Enforce {
		for i := range rates {
			b[i] = append(b[i], logGrant{now, cost})
		}
	}
	for i, r := range rates {
		var win []logGrant
		for _, g := range b[i] {
			if g.at > now-int64(r.Period) && g.at <= now {
				win = append(win, g)
			}
		}
		slices.SortFunc(win, func(a, b logGrant) int { return cmp.Compare(a.at, b.at) })
		rem := max(0, r.Count-used(win, now, r.Period))
		var reset, retry time.Duration
		if len(win) > 0 {
			reset = time.Duration(win[0].at + int64(r.Period) - now)
			d.FullReset = max(d.FullReset, time.Duration(win[len(win)-1].at+int64(r.Period)-now))
		}
		if need, freed := used(win, now, r.Period)+cost-r.Count, 0; !allowed && need > 0 {
			for _, g := range win {
				if freed += g.cost; freed >= need {
					retry = time.Duration(g.at + int64(r.Period) - now)
					break
				}
			}
		}
		if rem < d.Remaining || rem == d.Remaining && retry > d.RetryAfter {
			d.Rate, d.Remaining, d.Reset = r, rem, reset
		}
		d.RetryAfter = max(d.RetryAfter, retry)
	}
	return d, nil
}

// touches reports whether Release and Reset change rate r's grants.
func (s *logStore) touches(r core.Rate) bool { return !s.exactOnly || r.Count <= bounds.LargestExact }

func (s *logStore) Release(_ context.Context, q core.Query, grant int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(q)
	for i, r := range q.Policy.Rates() {
		if j := slices.Index(b[i], logGrant{grant, max(q.Cost, 1)}); j >= 0 && s.touches(r) {
			b[i] = slices.Delete(b[i], j, j+1)
		}
	}
	return nil
}

func (s *logStore) Reset(_ context.Context, q core.Query) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(q)
	for i, r := range q.Policy.Rates() {
		if s.touches(r) {
			b[i] = nil
		}
	}
	return nil
}

// suiteOn runs the conformance suite's scenario on a logStore with the flaw named by the
// environment, in a child process, and returns its output and whether it passed.
func suiteOn(t *testing.T, test, scenario, flaw string) (string, bool) {
	t.Helper()
	out, passed := rerun(t, "REQLIMIT_SUITE_FLAW="+flaw, "-test.run", "^"+test+"$/^"+scenario+"$", "-test.count=1", "-test.v")
	return lastLines(out, 4), passed
}

// rerun runs this test binary again with args and one more environment variable, and
// reports its output and whether it passed. A binary this platform cannot start directly
// (a cross-built one, run through an emulator by go test -exec) skips the test: a start
// failure must not read as the child's failing.
func rerun(t *testing.T, env string, args ...string) ([]byte, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if _, ran := err.(*exec.ExitError); err != nil && !ran {
		t.Skipf("cannot start the test binary again here (%v): the native build runs this test", err)
	}
	return out, err == nil
}

// runSuiteOnFlawedStore is the child's part: the suite on a logStore with the flaw.
func runSuiteOnFlawedStore(t *testing.T, flaw string) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
		s := newLogStore(clock.Now)
		s.sharePolicies = flaw == "sharePolicies"
		s.exactOnly = flaw == "exactOnly"
		s.peekAdmits = flaw == "peekAdmits"
		return storetest.Harness{Store: s, Advance: func(d time.Duration) { clock.Advance(d) }}
	})
}

// The suite's Isolation checks that a bucket's identity includes its policy: a store that
// keys buckets by scope and key alone gives "2/1h" the grants "1/1h" made. It decided the
// other policy's request once, which 2/1h admits over one shared grant, and passed it.
func TestConformanceSuiteFailsAStoreThatSharesBucketsBetweenPolicies(t *testing.T) {
	const name = "TestConformanceSuiteFailsAStoreThatSharesBucketsBetweenPolicies"
	if flaw, ok := os.LookupEnv("REQLIMIT_SUITE_FLAW"); ok {
		runSuiteOnFlawedStore(t, flaw)
		return
	}
	if out, ok := suiteOn(t, name, "Isolation", ""); !ok {
		t.Fatalf("the sound brute-force store fails Isolation:\n%s", out)
	}
	if out, ok := suiteOn(t, name, "Isolation", "sharePolicies"); ok {
		t.Fatalf("Isolation passed a store whose 1/1h and 2/1h buckets of one scope and key share their grants:\n%s", out)
	}
}

// The suite's Reset says a reset forgets a bucket's grants in every rate, exact and
// bounded. Its policies that have a bounded rate report their exact rate, which has the
// fewest left, so a store that left the bounded rate's grants counted ("2/1h,300/1d")
// answered the same, and passed.
func TestConformanceSuiteFailsAStoreWhoseResetKeepsBoundedGrants(t *testing.T) {
	const name = "TestConformanceSuiteFailsAStoreWhoseResetKeepsBoundedGrants"
	if flaw, ok := os.LookupEnv("REQLIMIT_SUITE_FLAW"); ok {
		runSuiteOnFlawedStore(t, flaw)
		return
	}
	if out, ok := suiteOn(t, name, "Reset", ""); !ok {
		t.Fatalf("the sound brute-force store fails Reset:\n%s", out)
	}
	if out, ok := suiteOn(t, name, "Reset", "exactOnly"); ok {
		t.Fatalf("Reset passed a store whose resets leave the grants of bounded rates counted:\n%s", out)
	}
}

// The suite's Peek says a Peek reports what Enforce would decide, yet asked only while the
// key had room: a store that admitted every Peek passed it.
func TestConformanceSuiteFailsAStoreThatAdmitsEveryPeek(t *testing.T) {
	const name = "TestConformanceSuiteFailsAStoreThatAdmitsEveryPeek"
	if flaw, ok := os.LookupEnv("REQLIMIT_SUITE_FLAW"); ok {
		runSuiteOnFlawedStore(t, flaw)
		return
	}
	if out, ok := suiteOn(t, name, "Peek", ""); !ok {
		t.Fatalf("the sound brute-force store fails Peek:\n%s", out)
	}
	if out, ok := suiteOn(t, name, "Peek", "peekAdmits"); ok {
		t.Fatalf("Peek passed a store that admits every Peek, the quota used or not:\n%s", out)
	}
}
