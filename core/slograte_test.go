package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
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
		l.Check(context.Background(), adapter.Input{Route: "/r" + string(rune('a'+i)), Peer: "192.0.2.1:1"}, nil)
	}
	// One line for each second the loop touched, at most.
	most := int(time.Since(start)/time.Second) + 2
	if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines > most {
		t.Errorf("%d slog lines for one store outage seen by 20 limits within %v, want at most %d:\n%s", lines, time.Since(start), most, buf.String())
	}
}

// TestClientErrorsDoNotSilenceAStoreOutage: a key function's error, which a client causes
// at will (a malformed token), took the process's one log line of the second, and a
// store outage seen in that second by another limit was never logged. The two kinds are
// limited apart.
func TestClientErrorsDoNotSilenceAStoreOutage(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	badToken := adapter.Must(100, time.Minute, core.WithStore(core.NewMemoryStore(nil)),
		core.WithKey(func(core.Request) (string, error) { return "", errors.New("malformed token") }))
	storeLimit := adapter.Must(100, time.Minute, core.WithStore(downStore{}))
	for try := 0; ; try++ {
		// Start in a second of its own, which no earlier test's error has taken.
		time.Sleep(time.Until(time.Unix(time.Now().Unix()+1, 0)))
		buf.Reset()
		sec := time.Now().Unix()
		badToken.Check(context.Background(), adapter.Input{Route: "/api", Peer: "203.0.113.9:1", Request: req()}, nil)
		storeLimit.Check(context.Background(), adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}, nil)
		if time.Now().Unix() == sec || try == 4 {
			break // else the second call had a second of its own: again
		}
	}
	if !strings.Contains(buf.String(), "malformed token") || !strings.Contains(buf.String(), "store failed") {
		t.Errorf("a client's bad key and a store outage in one second: want both logged, got:\n%s", buf.String())
	}
	// Only the outage was decided by the fail mode: a bad key's line naming one would
	// read as an outage.
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "fail_mode=") != strings.Contains(line, "store failed") {
			t.Errorf("line %q: want fail_mode on a store failure's line only", line)
		}
	}
}
