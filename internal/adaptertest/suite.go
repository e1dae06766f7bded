package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// A Step is one request and what its response must be.
type Step struct {
	Request
	Status int
	// Header lists exact field values; "" means the field must be absent.
	Header map[string]string
	// Body, when set, is the exact body.
	Body string
	// Check, when set, checks what Header cannot say exactly.
	Check func(http.Header) error
	// Do, when set, runs before the request is sent, with the scenario's probe; an
	// error fails the step.
	Do func(*Probe) error
}

// A Probe records what a scenario's hooks saw.
type Probe struct {
	mu     sync.Mutex
	Events []core.Event
	Errors []error
	// Quota is there for a scenario's limit to use (core.WithQuota) and its steps to call.
	Quota core.Quota
}

// Observer returns a core.WithObserver option recording into p.
func (p *Probe) Observer() core.Option {
	return core.WithObserver(func(e core.Event) { p.mu.Lock(); p.Events = append(p.Events, e); p.mu.Unlock() })
}

// ErrorHook returns a core.WithErrorHook option recording into p.
func (p *Probe) ErrorHook() core.Option {
	return core.WithErrorHook(func(_ context.Context, err error) { p.mu.Lock(); p.Errors = append(p.Errors, err); p.mu.Unlock() })
}

// A Scenario is one row of the suite: an application and the requests it must answer so.
type Scenario struct {
	Name string
	// Skip, when it returns a reason, skips the scenario for that adapter.
	Skip func(Traits) string
	// App builds the application; p records observer events and store errors.
	App   func(tr Traits, a Adapter, p *Probe) App
	Steps func(tr Traits) []Step
	// Check, when set, runs after the steps.
	Check func(t *testing.T, tr Traits, p *Probe)
}

// ErrStoreDown is what FailingStore returns.
var ErrStoreDown = errors.New("store down")

// FailingStore is a core.Store whose every decision fails, for the fail modes.
type FailingStore struct{}

// Decide fails.
func (FailingStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, ErrStoreDown
}

// Run runs every scenario against a; each gets its own memory store, on a clock that stands
// still: the scenarios want exact fields ("t=60", "Retry-After: 60"), which a machine
// stalled for a second between two of a scenario's requests would otherwise turn to 59.
func Run(t *testing.T, a Adapter) {
	tr := a.Traits()
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Skip != nil {
				if why := sc.Skip(tr); why != "" {
					t.Skip(why)
				}
			}
			p := &Probe{}
			stopped := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			app := withStore(sc.App(tr, a, p), core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: stopped.Now})))
			send := a.Serve(app)
			for i, st := range sc.Steps(tr) {
				if st.Do != nil {
					if err := st.Do(p); err != nil {
						t.Fatalf("step %d: %v", i+1, err)
					}
				}
				checkStep(t, i+1, st, send(st.Request))
			}
			if sc.Check != nil {
				sc.Check(t, tr, p)
			}
		})
	}
	t.Run("bad-arguments", func(t *testing.T) { badArguments(t, a) })
}

// withStore prepends store to every limit's options, so a limit's own WithStore wins.
func withStore(app App, store core.Option) App {
	for i := range app.Use {
		app.Use[i] = app.Use[i].WithOpts(store)
	}
	for i := range app.Pre {
		app.Pre[i] = app.Pre[i].WithOpts(store)
	}
	for i := range app.Routes {
		for j := range app.Routes[i].Limits {
			app.Routes[i].Limits[j] = app.Routes[i].Limits[j].WithOpts(store)
		}
	}
	return app
}

func checkStep(t *testing.T, n int, st Step, got Response) {
	t.Helper()
	if got.Status != st.Status {
		t.Errorf("request %d (%s from %q %q): status %d, want %d (body %q)", n, st.Path, st.RemoteAddr(), st.Header, got.Status, st.Status, got.Body)
	}
	for name, want := range st.Header {
		if v := got.Header.Get(name); v != want {
			t.Errorf("request %d (%s from %q %q): %s %q, want %q", n, st.Path, st.RemoteAddr(), st.Header, name, v, want)
		}
	}
	if st.Check != nil {
		if err := st.Check(got.Header); err != nil {
			t.Errorf("request %d (%s): %v", n, st.Path, err)
		}
	}
	if st.Body != "" && got.Body != st.Body {
		t.Errorf("request %d (%s): body %q, want %q", n, st.Path, got.Body, st.Body)
	}
}

func badArguments(t *testing.T, a Adapter) {
	name := a.Traits().Name
	type bad struct {
		count  int
		period time.Duration
		want   []string
	}
	cases := []bad{
		{0, time.Minute, []string{name + ".Limit(0, 1m0s)", "count 0", "adaptertest.go:"}},
		{3, 0, []string{name + ".Limit(3, 0s)", "period 0s"}},
		{-1, time.Second, []string{"count -1"}},
		// A bare number is nanoseconds: Limit(3, 60) would admit everything.
		{3, 60, []string{name + ".Limit(3, 60ns)", "period 60ns is below the 1ms minimum", "60*time.Second", "WithShortPeriods", "adaptertest.go:"}},
		{3, time.Nanosecond, []string{"period 1ns"}},
		{3, 999 * time.Microsecond, []string{"period 999µs"}},
	}
	if over := int64(bounds.LargestCount) + 1; over <= math.MaxInt { // an int that can exceed it: not on 32-bit platforms
		cases = append(cases, bad{int(over), time.Hour, []string{"count 10000000000001 is above the largest, 10000000000000"}},
			bad{math.MaxInt, time.Second, []string{"count 9223372036854775807"}})
	}
	for _, c := range cases {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			a.Limit(c.count, c.period)
			return "no panic"
		}()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Limit(%d, %v) panicked with %q; want it to name %q", c.count, c.period, msg, w)
			}
		}
	}
	for _, ok := range []struct {
		count  int
		period time.Duration
		opts   []core.Option
	}{
		{20, 50 * time.Millisecond, nil}, {5, 10 * time.Millisecond, nil}, {3, time.Millisecond, nil},
		{100, 100 * time.Microsecond, []core.Option{core.WithShortPeriods()}},
		{bounds.LargestInt, time.Hour, nil},
	} {
		msg := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg = fmt.Sprint(r)
				}
			}()
			a.Limit(ok.count, ok.period, ok.opts...)
			return ""
		}()
		if msg != "" {
			t.Errorf("Limit(%d, %v): %s", ok.count, ok.period, msg)
		}
	}
	for _, policy := range []string{"3/60ns", "3/999us", "10000000000001/1d", "999999999999999999/1d", "110000000000000/d", "9223372036854775807/1s", "3/.s", "3/-1s"} {
		if err := a.New(policy); err == nil || !strings.Contains(err.Error(), strconv.Quote(policy)) || !strings.Contains(err.Error(), "adaptertest.go:") {
			t.Errorf("New(%q): error %v, want one naming the policy and where it was registered", policy, err)
		}
	}
	for _, policy := range []string{"20/50ms", "10/.5s", strconv.Itoa(trillion) + "/365d", strconv.Itoa(bounds.LargestInt) + "/1d"} {
		if err := a.New(policy); err != nil {
			t.Errorf("New(%q): %v", policy, err)
		}
	}
	if err := a.New("100/100us", core.WithShortPeriods()); err != nil {
		t.Errorf(`New("100/100us", WithShortPeriods()): %v`, err)
	}
	for _, policy := range []string{"", "3", "3/", "x/1m", "0/1m", "3/1m,"} {
		err := a.New(policy)
		if !errors.Is(err, core.ErrBadPolicy) {
			t.Errorf("New(%q): error %v, want one wrapping ErrBadPolicy", policy, err)
		} else if !strings.Contains(err.Error(), strconv.Quote(policy)) {
			t.Errorf("New(%q): error %q does not name the policy", policy, err)
		}
	}
	if err := a.New("3/1m", core.WithFailStatus(200)); err == nil || !strings.Contains(err.Error(), "200") {
		t.Errorf("New with WithFailStatus(200): error %v, want one naming 200", err)
	}
	if err := a.New("3/1m, 10/1h"); err != nil {
		t.Errorf(`New("3/1m, 10/1h"): %v`, err)
	}
}
