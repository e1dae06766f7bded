package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// Two routes that share a quota through WithScope share it under FailLocal too:
// docs/operations.md says each instance then "enforces the limit on its own", and
// WithScope says limits of one scope and policy share a quota per client. A local store of
// each limit's own admitted the quota once per route.
func TestFailLocalKeepsAScopeSharedBetweenRoutes(t *testing.T) {
	opts := []core.Option{core.WithStore(downStore{}), core.WithFailMode(core.FailLocal),
		core.WithScope("login"), core.WithErrorHook(func(context.Context, error) {})}
	a := adapter.Must(3, time.Minute, opts...)
	b := adapter.Must(3, time.Minute, opts...)
	got := 0
	for _, route := range []string{"POST /login", "POST /v2/login"} {
		l := a
		if route != "POST /login" {
			l = b
		}
		for range 3 {
			if adapter.Check(l, context.Background(), adapter.Input{Route: route, Peer: "192.0.2.1:1"}, nil).Allowed {
				got++
			}
		}
	}
	if got != 3 {
		t.Fatalf("3/1m shared by two routes under WithScope(\"login\"), store down, FailLocal: %d of 6 admitted in one instance, want 3", got)
	}
}
