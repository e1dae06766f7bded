package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Two routes that share a quota through WithScope share it under FailLocal too:
// docs/operations.md says each instance then "enforces the limit on its own", and
// WithScope says limits of one scope and policy share a quota per client. A local store of
// each limit's own admitted the quota once per route.
func TestFailLocalKeepsAScopeSharedBetweenRoutes(t *testing.T) {
	opts := []core.Option{core.WithStore(downStore{}), core.WithFailMode(core.FailLocal),
		core.WithScope(freshScope("login")), core.WithErrorHook(func(context.Context, error) {})}
	a := adapter.Must(3, time.Minute, opts...)
	b := adapter.Must(3, time.Minute, opts...)
	got := 0
	for _, route := range []string{"POST /login", "POST /v2/login"} {
		l := a
		if route != "POST /login" {
			l = b
		}
		for range 3 {
			if l.Check(context.Background(), adapter.Input{Route: route, Peer: "192.0.2.1:1"}, nil).Allowed {
				got++
			}
		}
	}
	if got != 3 {
		t.Fatalf("3/1m shared by two routes under WithScope(\"login\"), store down, FailLocal: %d of 6 admitted in one instance, want 3", got)
	}
}

// failingClient stands for a store holding a client (a Redis store's connection pool):
// a pointer, as real stores are, that fails every decision.
type failingClient struct{ _ [1 << 16]byte }

func (*failingClient) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("connection refused")
}

// A store that failed under FailLocal is collected once the application drops every limit
// using it, as an app that rebuilds its router and store on a configuration reload does:
// stand-ins kept in a map by store held each store that ever failed for the life of the
// process.
func TestFailLocalDoesNotKeepADroppedStoreAlive(t *testing.T) {
	w := func() weak.Pointer[failingClient] {
		s := new(failingClient)
		l := adapter.Must(3, time.Minute, core.WithStore(s), core.WithFailMode(core.FailLocal),
			core.WithErrorHook(func(context.Context, error) {}))
		if !l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}, nil).Allowed {
			t.Fatal("FailLocal refused the first request")
		}
		return weak.Make(s)
	}()
	for range 5 {
		runtime.GC()
		if w.Value() == nil {
			return
		}
	}
	t.Error("a store whose limits are all gone is still reachable after it failed once under FailLocal")
}

// shardedStore is a store value holding a slice (its servers' addresses, say): a valid
// core.Store that cannot be a map key.
type shardedStore struct{ servers []string }

func (shardedStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("connection refused")
}

// Limits sharing a scope share a quota under FailLocal also when their store is a value
// that cannot be a map key: a stand-in per limit for such a store let the two routes
// sharing 3/1m through WithScope admit 6 while the store was down.
func TestFailLocalKeepsAScopeSharedForAStoreHoldingASlice(t *testing.T) {
	store := shardedStore{servers: []string{"10.0.0.1:6379", "10.0.0.2:6379"}}
	opts := []core.Option{core.WithStore(store), core.WithFailMode(core.FailLocal),
		core.WithScope(freshScope("sharded-login")), core.WithErrorHook(func(context.Context, error) {})}
	a := adapter.Must(3, time.Minute, opts...)
	b := adapter.Must(3, time.Minute, opts...)
	got := 0
	for _, c := range []struct {
		l     adapter.Limiter
		route string
	}{{a, "POST /login"}, {b, "POST /v2/login"}} {
		for range 3 {
			if c.l.Check(context.Background(), adapter.Input{Route: c.route, Peer: "192.0.2.1:1"}, nil).Allowed {
				got++
			}
		}
	}
	if got != 3 {
		t.Errorf("3/1m shared by two routes under WithScope, store (a struct holding a slice) down, FailLocal: %d of 6 admitted, want 3", got)
	}
}

// freshScope returns a scope name no other run of a test in this process used: FailLocal's
// stand-in for a named scope lasts as long as the process, so a test run again
// (-count=2) would find the last run's grants there.
func freshScope(name string) string { return fmt.Sprintf("%s-%d", name, scopeRuns.Add(1)) }

var scopeRuns atomic.Int64
