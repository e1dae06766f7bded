package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestStoreErrorsAreLoggedAtMostOnceASecond: without an error hook, store errors are
// logged at most once a second (WithErrorHook's doc, docs/operations.md). The second was
// kept per limit, so in one outage an application with a limit per route logged a line
// per route each second: 20 within a millisecond here.
func TestStoreErrorsAreLoggedAtMostOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	var limits []adapter.Limiter
	for range 20 {
		limits = append(limits, adapter.Must(100, time.Minute, core.WithStore(downStore{})))
	}
	start := time.Now()
	for i, l := range limits {
		adapter.Check(l, context.Background(), adapter.Input{Route: "/r" + string(rune('a'+i)), Peer: "192.0.2.1:1"}, nil)
	}
	// One line for each second the loop touched, at most.
	most := int(time.Since(start)/time.Second) + 2
	if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines > most {
		t.Errorf("%d slog lines for one store outage seen by 20 limits within %v, want at most %d:\n%s", lines, time.Since(start), most, buf.String())
	}
}
