package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestFailStatusWithoutTextDoesNotReadAsRateLimited: a store failure refused with a
// WithFailStatus code that net/http has no text for (599, 520, 499) got the deny body,
// "Too Many Requests": an outage read as the client having sent too much, which FailClosed
// exists to avoid. Its body says the limit could not decide.
func TestFailStatusWithoutTextDoesNotReadAsRateLimited(t *testing.T) {
	for _, code := range []int{599, 520, 499} {
		l := adapter.Must(3, time.Minute, core.WithStore(downStore{}), core.WithFailMode(core.FailClosed),
			core.WithFailStatus(code), core.WithErrorHook(func(context.Context, error) {}))
		v := l.Check(context.Background(), adapter.Input{Route: "/r", Peer: "192.0.2.1:1"}, nil)
		body := l.DenyBody(v.Status, v.Err)
		if v.Allowed || v.Status != code || body != "Rate Limit Unavailable\n" {
			t.Errorf("WithFailStatus(%d), store down: allowed %v, status %d, body %q; want refused with %d, %q",
				code, v.Allowed, v.Status, body, code, "Rate Limit Unavailable\n")
		}
	}
}
