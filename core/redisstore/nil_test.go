package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/nethttp"
)

// panicked returns what f panicked with, or "" if it returned.
func panicked(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// An application whose Redis is optional often holds a nil *redisstore.Store when it is
// not configured. Given to a limit, it is refused at registration; before, it registered
// and every request on the route panicked, whatever the fail mode.
func TestNilStoreIsRefusedAtRegistration(t *testing.T) {
	var store *redisstore.Store
	msg := panicked(func() { nethttp.Limit(3, time.Minute, core.WithStore(store), core.WithFailMode(core.FailOpen)) })
	if !strings.Contains(msg, "(*redisstore.Store)(nil)") {
		t.Errorf("a nil *redisstore.Store: registration panicked %q; want it refused, naming the store", msg)
	}
}

// New refuses a nil client with a message that names it and the fix, not a nil
// dereference.
func TestNewRefusesNilClient(t *testing.T) {
	var never *redis.Client
	for name, c := range map[string]redis.UniversalClient{"nil": nil, "a nil *redis.Client": never} {
		msg := panicked(func() { redisstore.New(c) })
		if !strings.Contains(msg, "redisstore.New") || !strings.Contains(msg, "redis.NewClient") {
			t.Errorf("%s: New panicked %q; want redisstore.New and the fix named", name, msg)
		}
	}
}
