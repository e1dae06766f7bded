package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// WithScope("") would quietly mean no scope, each route its own buckets, where the caller
// asked for a shared one: it is refused, naming the fix.
func TestEmptyScopeNameIsRefused(t *testing.T) {
	_, err := adapter.New(3, time.Minute, core.WithScope(""))
	if err == nil || !strings.Contains(err.Error(), `WithScope("")`) {
		t.Fatalf("WithScope(\"\"): %v, want an error naming it", err)
	}
}

// KeyByHeader("") would key every request by the client's IP without a word: each request
// reports the missing name to the error hook, and is still limited by its IP.
func TestKeyByHeaderWithoutANameReportsItsError(t *testing.T) {
	var errs []error
	l := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByHeader(" ")),
		core.WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	in := adapter.Input{Route: "/a", Peer: "192.0.2.1:1", Request: req()}
	first, second := l.Check(context.Background(), in, nil), l.Check(context.Background(), in, nil)
	if !first.Allowed || second.Allowed {
		t.Errorf("allowed %v then %v, want the client's IP limited to 1", first.Allowed, second.Allowed)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `KeyByHeader(" "): a header name is required`) {
		t.Errorf("error hook saw %v, want the missing name at each request", errs)
	}
}
