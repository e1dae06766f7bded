package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
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
}

// A Probe records what a scenario's hooks saw.
type Probe struct {
	mu     sync.Mutex
	Events []core.Event
	Errors []error
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

// Run runs every scenario against a; each gets its own memory store.
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
			app := withStore(sc.App(tr, a, p), core.WithStore(core.NewMemoryStore()))
			send := a.Serve(app)
			for i, st := range sc.Steps(tr) {
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
	for _, c := range []struct {
		count  int
		period time.Duration
		want   []string
	}{
		{0, time.Minute, []string{name + ".Limit(0, 1m0s)", "count 0", "adaptertest.go:"}},
		{3, 0, []string{name + ".Limit(3, 0s)", "period 0s"}},
		{-1, time.Second, []string{"count -1"}},
	} {
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
	for _, policy := range []string{"", "3", "3/", "x/1m", "0/1m", "3/1m,"} {
		err := a.New(policy)
		if !errors.Is(err, core.ErrBadPolicy) && !errors.Is(err, core.ErrBadCount) {
			t.Errorf("New(%q): error %v, want one wrapping ErrBadPolicy or ErrBadCount", policy, err)
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
