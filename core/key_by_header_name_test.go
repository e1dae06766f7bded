package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// A header name with spaces around it (a name read from configuration) is the name:
// before, it was looked up as written, found on no request, and every request was keyed
// by its client's IP without a word.
func TestKeyByHeaderNameWithSpacesKeysByTheHeader(t *testing.T) {
	var errs []error
	l := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByHeader(" X-Api-Key\t")),
		core.WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	for _, key := range []string{"alice", "bob"} {
		in := adapter.Input{Route: "/a", Peer: "192.0.2.1:1", Request: req("X-Api-Key", key)}
		if v := l.Check(context.Background(), in, nil); !v.Allowed {
			t.Errorf("key %q, first request from a shared IP: refused; want it keyed by its own header", key)
		}
	}
	if len(errs) != 0 {
		t.Errorf("error hook saw %v", errs)
	}
}

// A name no header field can have is reported at each request, as a missing one is,
// and the request is limited by its client's IP.
func TestKeyByHeaderBadNameReportsItsError(t *testing.T) {
	var errs []error
	l := adapter.Must(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithKey(core.KeyByHeader("X-Api-Key:")),
		core.WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	in := adapter.Input{Route: "/a", Peer: "192.0.2.1:1", Request: req("X-Api-Key", "alice")}
	first, second := l.Check(context.Background(), in, nil), l.Check(context.Background(), in, nil)
	if !first.Allowed || second.Allowed {
		t.Errorf("allowed %v then %v, want the client's IP limited to 1", first.Allowed, second.Allowed)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `KeyByHeader("X-Api-Key:")`) {
		t.Errorf("error hook saw %v, want the bad name at each request", errs)
	}
}
