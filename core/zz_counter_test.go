package core_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// Review: Counter.Add's error for a bad weight quotes the counter's internal key prefix,
// NUL byte included: counter "\x00counter failed-logins": Add("alice", 0)... The message
// should name the counter as the caller did: counter "failed-logins".
func TestZZCounterErrorNamesTheCounter(t *testing.T) {
	c, err := core.NewCounter("failed-logins", 5, time.Minute, core.NewMemoryStore(nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Add(context.Background(), "alice", 0)
	if err == nil {
		t.Fatal("Add with weight 0: no error")
	}
	if !strings.Contains(err.Error(), `counter "failed-logins"`) {
		t.Errorf("error = %q, want it to name counter \"failed-logins\"", err)
	}
}
