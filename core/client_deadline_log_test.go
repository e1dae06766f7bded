package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// TestClientDeadlinesDoNotSilenceAStoreOutage: a request whose own deadline passed before
// the store answered is one a client can make at will (gRPC's grpc-timeout is the
// client's), as a bad key is. It was logged as a store error and took the process's one
// store line of the second, so a client sending calls with a deadline too short to decide
// kept a store outage seen by another limit out of the log. The two are limited apart.
func TestClientDeadlinesDoNotSilenceAStoreOutage(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	shortDeadline := adapter.Must(100, time.Minute, core.WithStore(deadlineStore{}))
	storeLimit := adapter.Must(100, time.Minute, core.WithStore(downStore{}))
	for try := 0; ; try++ {
		// Start in a second of its own, which no earlier test's error has taken.
		time.Sleep(time.Until(time.Unix(time.Now().Unix()+1, 0)))
		buf.Reset()
		sec := time.Now().Unix()
		shortDeadline.Check(lateContext{context.Background()}, adapter.Input{Route: "/api", Peer: "203.0.113.9:1"}, nil)
		storeLimit.Check(context.Background(), adapter.Input{Route: "/login", Peer: "192.0.2.1:1"}, nil)
		if time.Now().Unix() == sec || try == 4 {
			break // else the second call had a second of its own: again
		}
	}
	if !strings.Contains(buf.String(), "request ended before the store decided") || !strings.Contains(buf.String(), "store failed") {
		t.Errorf("a client's short deadline and a store outage in one second: want both logged, got:\n%s", buf.String())
	}
}
