package core_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A bad limit panics at registration naming the adapter function, the value, and the
// application's line, found without core knowing its adapters by name.
func TestLimitPanicNamesValueAndSite(t *testing.T) {
	defer func() {
		msg := fmt.Sprint(recover())
		for _, want := range []string{"nethttp.Limit(0, 1m0s)", "limiter_test.go:", `register("GET /user/test"`, "count 0"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("panic %q lacks %q", msg, want)
			}
		}
	}()
	register := func(pattern string, h func(http.Handler) http.Handler) {}
	register("GET /user/test", nethttp.Limit(0, time.Minute))
	t.Fatal("no panic")
}

// downStore fails every decision, like a Redis that is gone.
type downStore struct{}

func (downStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("connection refused")
}

func TestFailModes(t *testing.T) {
	in := adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}
	var hooked []error
	hook := core.WithErrorHook(func(_ context.Context, err error) { hooked = append(hooked, err) })
	for _, c := range []struct {
		mode     core.FailMode
		status   int
		allowed  []bool
		wantCode int
	}{
		{core.FailOpen, 0, []bool{true, true, true, true}, 0},
		{core.FailClosed, 0, []bool{false, false, false, false}, 429},
		{core.FailClosed, 503, []bool{false, false, false, false}, 503},
		{core.FailLocal, 0, []bool{true, true, true, false}, 429}, // still 3 per minute, locally
	} {
		opts := []core.Option{core.WithStore(downStore{}), core.WithFailMode(c.mode), hook}
		if c.status != 0 {
			opts = append(opts, core.WithFailStatus(c.status))
		}
		l, err := adapter.New(3, time.Minute, opts...)
		if err != nil {
			t.Fatal(err)
		}
		hooked = nil
		for i, want := range c.allowed {
			v := l.Check(context.Background(), in, nil)
			if v.Allowed != want || v.Err == nil || (!v.Allowed && v.Status != c.wantCode) {
				t.Fatalf("%v request %d: %+v, want allow=%v status %d", c.mode, i+1, v, want, c.wantCode)
			}
		}
		if len(hooked) != len(c.allowed) || !strings.Contains(hooked[0].Error(), "connection refused") {
			t.Fatalf("%v: error hook saw %v", c.mode, hooked)
		}
	}
}

// A cost above the limit is refused whatever the fail mode (it could never fit, and
// admitting it uncounted would break the limit), with 413 rather than a 429 that invites a
// retry, and the error hook hears of it.
func TestCostAboveLimitIsRefused(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		hooked := 0
		l, err := adapter.New(2, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithFailMode(mode),
			core.WithCost(func(core.Request) int { return 5 }),
			core.WithErrorHook(func(context.Context, error) { hooked++ }))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			v := l.Check(context.Background(), adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: fakeRequest{}}, nil)
			if v.Allowed || v.Status != 413 || !errors.Is(v.Err, core.ErrCostTooHigh) {
				t.Fatalf("%v, request %d: %+v", mode, i, v)
			}
		}
		if hooked != 10 {
			t.Fatalf("%v: error hook called %d times, want 10", mode, hooked)
		}
	}
}
