package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// A timeout given as a bare number is nanoseconds: WithTimeout(100) fails every decision,
// and a limit under FailOpen then admits every request. The error names the deadline
// that ran out and the option that sets it, not only "context deadline exceeded".
func TestDeadlineErrorNamesTheTimeout(t *testing.T) {
	needRedis(t)
	s := redisstore.New(newClient(t, standalone), redisstore.WithTimeout(100), redisstore.WithPrefix(freshPrefix(t)))
	_, err := s.Decide(context.Background(), core.Query{Policy: mustParse("3/1m"), Scope: "s", Key: "k", Cost: 1})
	if err == nil {
		t.Fatal("decided within a 100ns deadline")
	}
	if msg := err.Error(); !strings.Contains(msg, "100ns") || !strings.Contains(msg, "WithTimeout") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WithTimeout(100): error %q; want the 100ns deadline and WithTimeout named, and errors.Is(err, context.DeadlineExceeded)", msg)
	}
}
