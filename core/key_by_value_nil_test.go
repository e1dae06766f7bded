package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// No value is stored under a nil key (context.WithValue refuses one): KeyByValue(nil)
// would key every request by its client's IP without a word. As KeyByHeader("") does,
// each request reports it, and is still limited by its IP.
func TestKeyByValueWithoutAKeyReportsItsError(t *testing.T) {
	var errs []error
	l := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByValue(nil)),
		core.WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	in := adapter.Input{Route: "/a", Peer: "192.0.2.1:1", Request: req()}
	first, second := l.Check(context.Background(), in, nil), l.Check(context.Background(), in, nil)
	if !first.Allowed || second.Allowed {
		t.Errorf("allowed %v then %v, want the client's IP limited to 1", first.Allowed, second.Allowed)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "KeyByValue(nil)") {
		t.Errorf("error hook saw %v, want the missing key at each request", errs)
	}
}
