package redisstore_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// A cost no rate admits is refused before Redis is asked: the server runs no script for
// it (its own command statistics; its script would refuse without writing, so the keys
// cannot tell), while a cost that fits runs one and writes its bucket.
func TestCostAboveTheLimitNeverReachesRedis(t *testing.T) {
	needRedis(t)
	own, err := redistest.StartServer(tmpRoot, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Stop)
	ctx := context.Background()
	c := newClient(t, own)
	cost := 5
	l := adapter.Must(2, time.Minute, core.WithStore(redisstore.New(c, roomy, redisstore.WithDenyCache(false))),
		core.WithRate(10, time.Hour), core.WithCost(func(core.Request) int { return cost }),
		core.WithErrorHook(func(context.Context, error) {}))
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	in := adapter.Input{Route: "/", Peer: "192.0.2.1:5", Request: adapter.HTTPRequest{R: httptest.NewRequest("GET", "/", nil)}}
	for range 3 {
		if v := l.Check(ctx, in, nil); v.Status != 413 {
			t.Fatalf("cost 5 of 2/1m: %+v, want 413", v)
		}
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil || strings.Contains(stats, "cmdstat_eval") || strings.Contains(stats, "cmdstat_fcall") {
		t.Fatalf("after costs no rate admits (%v), Redis ran a script:\n%s", err, stats)
	}
	cost = 2
	if v := l.Check(ctx, in, nil); !v.Allowed {
		t.Fatalf("cost 2 of 2/1m: %+v, want admitted", v)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("DBSIZE %d (%v) after an admitted request, want its bucket", n, err)
	}
	if stats, _ := c.Info(ctx, "commandstats").Result(); !strings.Contains(stats, "cmdstat_eval") && !strings.Contains(stats, "cmdstat_fcall") {
		t.Fatalf("an admitted request ran no script (the statistics cannot tell):\n%s", stats)
	}
}
