package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// An option left nil (one chosen by a condition that chose none) is no option, as a nil
// core.Option is to a limit; New once called it and panicked with a nil dereference.
func TestNewSkipsNilOption(t *testing.T) {
	needRedis(t)
	var none redisstore.Option
	var s *redisstore.Store
	if msg := panicked(func() { s = redisstore.New(newClient(t, standalone), none, redisstore.WithPrefix(freshPrefix(t))) }); msg != "" {
		t.Fatalf("New with a nil option panicked: %s", msg)
	}
	p, _ := core.NewPolicy(core.Rate{Count: 1, Period: time.Minute})
	q := core.Query{Policy: p, Scope: "s", Key: "k", Cost: 1}
	for i, want := range []bool{true, false} {
		d, err := s.Decide(context.Background(), q)
		if err != nil || d.Allowed != want {
			t.Fatalf("decision %d of 1/1m: allowed %v, %v; want %v", i+1, d.Allowed, err, want)
		}
	}
}

// A Store not made by New has no client. Every call fails naming the fix, rather than
// with a deadline that reads as a slow Redis.
func TestStoreNotMadeByNewSaysSo(t *testing.T) {
	s := new(redisstore.Store)
	p, _ := core.NewPolicy(core.Rate{Count: 1, Period: time.Minute})
	q := core.Query{Policy: p, Scope: "s", Key: "k", Cost: 1}
	ctx := context.Background()
	_, derr := s.Decide(ctx, q)
	for name, err := range map[string]error{"Decide": derr, "Reset": s.Reset(ctx, q), "Release": s.Release(ctx, q, 1)} {
		if err == nil || !strings.Contains(err.Error(), "redisstore.New") {
			t.Errorf("%s on a Store not made by New: %v; want an error naming redisstore.New", name, err)
		}
	}
}
