package nethttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

func comboServe(h http.Handler, tier string, status int) int {
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	if tier != "" {
		r.Header.Set("X-Tier", tier)
	}
	if status != 0 {
		r.Header.Set("X-Status", strconv.Itoa(status))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func comboHandler() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, _ := strconv.Atoi(r.Header.Get("X-Status"))
		if s == 0 {
			s = 200
		}
		w.WriteHeader(s)
	}
}

func comboPick(r core.Request) string { return r.Header("X-Tier") }

type comboEvents struct {
	mu sync.Mutex
	ev []core.Event
}

func (z *comboEvents) observe(e core.Event) { z.mu.Lock(); z.ev = append(z.ev, e); z.mu.Unlock() }
func (z *comboEvents) count(o core.Outcome) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	n := 0
	for _, e := range z.ev {
		if e.Outcome == o {
			n++
		}
	}
	return n
}

// Tiers + CountWhen: give-backs go to the tier's bucket; the tier and the own policy keep
// their counts.
func TestCombinedTiersCountWhen(t *testing.T) {
	h := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithTiers(comboPick, map[string]string{"gold": "3/1m", "free": "unlimited"}),
		core.WithCountWhen(core.Failed))(comboHandler())
	// 10 successful gold requests: all given back.
	for i := 0; i < 10; i++ {
		if c := comboServe(h, "gold", 200); c != 200 {
			t.Fatalf("gold success %d: %d", i, c)
		}
	}
	// 3 failed gold requests admitted, the 4th refused.
	for i := 0; i < 3; i++ {
		if c := comboServe(h, "gold", 401); c != 401 {
			t.Fatalf("gold fail %d: %d", i, c)
		}
	}
	if c := comboServe(h, "gold", 401); c != 429 {
		t.Fatalf("4th failed gold: %d, want 429", c)
	}
	// own policy untouched: one failure admitted, then refused.
	if c := comboServe(h, "", 401); c != 401 {
		t.Fatalf("own: %d", c)
	}
	if c := comboServe(h, "", 401); c != 429 {
		t.Fatalf("own 2nd: %d, want 429", c)
	}
	// unlimited unaffected
	for i := 0; i < 5; i++ {
		if c := comboServe(h, "free", 401); c != 401 {
			t.Fatalf("free: %d", c)
		}
	}
}

// Tiers + Cost: a cost above the tier's count is refused 413 even if the own policy allows it.
func TestCombinedTiersCost(t *testing.T) {
	cost := func(r core.Request) int { n, _ := strconv.Atoi(r.Header("X-Cost")); return max(n, 1) }
	h := nethttp.Limit(10, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithTiers(comboPick, map[string]string{"small": "2/1m"}), core.WithCost(cost))(comboHandler())
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header.Set("X-Tier", "small")
	r.Header.Set("X-Cost", "3")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Fatalf("cost 3 on tier 2/1m: %d, want 413", w.Code)
	}
}

// Tiers + DryRun: refused-but-let-through, and observer told Refused.
func TestCombinedTiersDryRun(t *testing.T) {
	var ev comboEvents
	h := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithTiers(comboPick, map[string]string{"gold": "2/1m"}), core.WithDryRun(), core.WithObserver(ev.observe))(comboHandler())
	for i := 0; i < 4; i++ {
		if c := comboServe(h, "gold", 200); c != 200 {
			t.Fatalf("dry run refused: %d", c)
		}
	}
	if ev.count(core.Refused) != 2 {
		t.Fatalf("refused events %d, want 2", ev.count(core.Refused))
	}
}

// Tiers + Penalty: refusals recorded in the tier's bucket.
func TestCombinedTiersPenalty(t *testing.T) {
	h := nethttp.Limit(100, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithTiers(comboPick, map[string]string{"gold": "2/1m"}), core.WithPenalty())(comboHandler())
	for i := 0; i < 2; i++ {
		comboServe(h, "gold", 200)
	}
	if c := comboServe(h, "gold", 200); c != 429 {
		t.Fatalf("3rd: %d", c)
	}
}

// Stacked CountWhen: both give back.
func TestCombinedStackedCountWhen(t *testing.T) {
	var ev1, ev2 comboEvents
	inner := nethttp.Limit(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed), core.WithObserver(ev1.observe))
	outer := nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed), core.WithObserver(ev2.observe))
	h := outer(inner(comboHandler()))
	for i := 0; i < 10; i++ {
		if c := comboServe(h, "", 200); c != 200 {
			t.Fatalf("success %d: %d", i, c)
		}
	}
	if ev1.count(core.Released) != 10 || ev2.count(core.Released) != 10 {
		t.Fatalf("released %d %d", ev1.count(core.Released), ev2.count(core.Released))
	}
}

// DryRun + FailClosed: never refuses.
func TestCombinedDryRunFailClosed(t *testing.T) {
	h := nethttp.Limit(1, time.Minute, core.WithStore(comboBroken{}), core.WithFailMode(core.FailClosed), core.WithDryRun(),
		core.WithErrorHook(func(context.Context, error) {}))(comboHandler())
	if c := comboServe(h, "", 200); c != 200 {
		t.Fatalf("dry run + fail closed: %d", c)
	}
}

type comboBroken struct{}

func (comboBroken) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("down")
}
func (comboBroken) Release(context.Context, core.Query, int64) error { return errors.New("down") }

// FailLocal + CountWhen: a local grant given back locally.
func TestCombinedFailLocalCountWhen(t *testing.T) {
	h := nethttp.Limit(2, time.Minute, core.WithStore(comboBroken{}), core.WithFailMode(core.FailLocal), core.WithCountWhen(core.Failed),
		core.WithErrorHook(func(context.Context, error) {}))(comboHandler())
	for i := 0; i < 5; i++ {
		if c := comboServe(h, "", 200); c != 200 {
			t.Fatalf("success %d under FailLocal: %d", i, c)
		}
	}
	for i := 0; i < 2; i++ {
		if c := comboServe(h, "", 401); c != 401 {
			t.Fatalf("fail %d: %d", i, c)
		}
	}
	if c := comboServe(h, "", 401); c != 429 {
		t.Fatalf("3rd fail: %d", c)
	}
}

// Tiers + FailLocal: each tier limited locally by its own policy.
func TestCombinedTiersFailLocal(t *testing.T) {
	h := nethttp.Limit(1, time.Minute, core.WithStore(comboBroken{}), core.WithFailMode(core.FailLocal),
		core.WithTiers(comboPick, map[string]string{"gold": "3/1m"}),
		core.WithErrorHook(func(context.Context, error) {}))(comboHandler())
	for i := 0; i < 3; i++ {
		if c := comboServe(h, "gold", 200); c != 200 {
			t.Fatalf("gold %d: %d", i, c)
		}
	}
	if c := comboServe(h, "gold", 200); c != 429 {
		t.Fatalf("gold 4th: %d", c)
	}
	if c := comboServe(h, "", 200); c != 200 {
		t.Fatalf("own 1st: %d", c)
	}
	if c := comboServe(h, "", 200); c != 429 {
		t.Fatalf("own 2nd: %d", c)
	}
}

// Tiers + WithKey error: falls back to the IP, still limited by the tier.
func TestCombinedTiersKeyError(t *testing.T) {
	key := func(core.Request) (string, error) { return "", errors.New("boom") }
	h := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(key),
		core.WithTiers(comboPick, map[string]string{"gold": "2/1m"}),
		core.WithErrorHook(func(context.Context, error) {}))(comboHandler())
	comboServe(h, "gold", 200)
	comboServe(h, "gold", 200)
	if c := comboServe(h, "gold", 200); c != 429 {
		t.Fatalf("gold 3rd: %d", c)
	}
}

// Tiers + Scope + Quota: Reset forgets the tier's grants.
func TestCombinedTiersQuotaReset(t *testing.T) {
	q := new(core.Quota)
	h := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithScope("combined-quota"), core.WithQuota(q),
		core.WithTiers(comboPick, map[string]string{"gold": "2/1m"}))(comboHandler())
	comboServe(h, "gold", 200)
	comboServe(h, "gold", 200)
	if c := comboServe(h, "gold", 200); c != 429 {
		t.Fatalf("gold 3rd: %d", c)
	}
	d, err := q.Peek(context.Background(), "192.0.2.1")
	if err != nil || d.Allowed {
		t.Fatalf("peek: %+v %v", d, err)
	}
	if err := q.Reset(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if c := comboServe(h, "gold", 200); c != 200 {
		t.Fatalf("after reset: %d", c)
	}
}

// FailLocal + WithFailStatus + WithDenyResponse: a request the local store refuses is over
// the limit and gets the deny response; only undecided refusals (FailClosed) say the fail
// status's text, with that status.
func TestCombinedFailLocalFailStatusDenyResponse(t *testing.T) {
	quiet := core.WithErrorHook(func(context.Context, error) {})
	local := nethttp.Limit(1, time.Minute, core.WithStore(comboBroken{}), core.WithFailMode(core.FailLocal), core.WithFailStatus(503),
		core.WithDenyResponse(429, "slow down\n"), quiet)(comboHandler())
	closed := nethttp.Limit(1, time.Minute, core.WithStore(comboBroken{}), core.WithFailMode(core.FailClosed), core.WithFailStatus(503),
		core.WithDenyResponse(429, "slow down\n"), quiet)(comboHandler())
	send := func(h http.Handler) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Code, w.Body.String()
	}
	send(local)
	if code, body := send(local); code != 429 || body != "slow down\n" {
		t.Errorf("FailLocal, over the local limit: %d %q, want 429 %q", code, body, "slow down\n")
	}
	if code, body := send(closed); code != 503 || body != "Service Unavailable\n" {
		t.Errorf("FailClosed: %d %q, want 503 %q", code, body, "Service Unavailable\n")
	}
}
