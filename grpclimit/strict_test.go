package grpclimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/grpclimit"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

func TestStrictMemory(t *testing.T) {
	strict(t, func(int) core.Store { return core.NewMemoryStore(nil) })
}

func TestStrictRedis(t *testing.T) {
	redistest.Require(t)
	srv, err := redistest.StartServer(t.TempDir(), false)
	if srv != nil {
		t.Cleanup(srv.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	prefix := fmt.Sprintf("grpclimit-strict-%d:", time.Now().UnixNano())
	strict(t, func(attempt int) core.Store {
		// A roomy timeout: a decision that times out is refused, and says nothing.
		return redisstore.New(rdb, redisstore.WithTimeout(5*time.Second), redisstore.WithPrefix(fmt.Sprintf("%s%d:", prefix, attempt)))
	})
}

type startKey struct{}

// strict hammers one method from 8 goroutines on the real clock and checks that no
// interval of length T held more than N admitted calls. Each call's admission is known
// only to lie between two server-side readings: one taken before the limit decides (an
// interceptor ahead of it) and one in the handler. An interval counts only calls whose
// whole span lies inside it, so a slow machine can hide a violation but never invent one.
// When the method was not contended enough to say anything (no refusal, or no more than
// N grants), it tries again with a longer window.
func strict(t *testing.T, newStore func(attempt int) core.Store) {
	const n, workers = 5, 8
	per := 200 * time.Millisecond
	for attempt := 1; attempt <= 3; attempt, per = attempt+1, per*2 {
		grants, refusals := hammer(t, newStore(attempt), n, per, workers)
		if worst := storetest.MaxInWindow(grants, per); worst > n {
			t.Fatalf("%d admitted calls fell inside one %v interval, limit %d per %v", worst, per, n, per)
		}
		if refusals > 0 && len(grants) > n {
			t.Logf("%d admitted and %d refused under %d per %v, never more than %d in any %v", len(grants), refusals, n, per, n, per)
			return
		}
		t.Logf("%d admitted and %d refused under %d per %v: not contended enough to show anything; again with a longer window", len(grants), refusals, n, per)
	}
	t.Fatal("the method was never contended enough to check the limit")
}

// hammer runs workers callers against a fresh server limited to n per per for five
// windows, and returns the admitted calls' spans and how many calls were refused.
func hammer(t *testing.T, store core.Store, n int, per time.Duration, workers int) ([]storetest.Call, int) {
	var mu sync.Mutex
	var grants []storetest.Call
	h := &healthService{onCheck: func(ctx context.Context) {
		end := time.Now()
		start, _ := ctx.Value(startKey{}).(time.Time)
		mu.Lock()
		grants = append(grants, storetest.Call{Start: start, End: end})
		mu.Unlock()
	}}
	stamp := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(context.WithValue(ctx, startKey{}, time.Now()), req)
	}
	// A store that fails to decide in time (Redis on a loaded machine) must refuse: the
	// default, FailOpen, would admit uncounted calls, which breaks the limit by design.
	var failures atomic.Int64
	ic := grpclimit.Must(map[string]string{check: fmt.Sprintf("%d/%dms", n, per.Milliseconds())}, core.WithStore(store),
		core.WithFailMode(core.FailClosed), core.WithErrorHook(func(context.Context, error) { failures.Add(1) }))
	conn := serve(t, h, grpc.ChainUnaryInterceptor(stamp, ic.Unary()))
	client := healthpb.NewHealthClient(conn)

	var refused atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * per)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
				switch status.Code(err) {
				case codes.OK:
				case codes.ResourceExhausted, codes.Unavailable:
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if f := failures.Load(); f > 0 {
		t.Logf("%d decisions failed, and were refused", f)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]storetest.Call(nil), grants...), int(refused.Load())
}
