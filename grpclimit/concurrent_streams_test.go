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
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/grpclimit"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

const fullDuplex = "/grpc.testing.TestService/FullDuplexCall"

// Streams one client opens at once, which send nothing (the limit counts a stream when it
// opens, before any message): within one window, no more than N get through, with the
// memory store (its clock standing still, so all fall in one window) and with Redis.
func TestConcurrentStreamsFromOneClientAdmitAtMostN(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		if admitted, undecided := openAtOnce(t, fresh()); admitted != 5 || undecided != 0 {
			t.Fatalf("%d streams admitted and %d undecided of 30 opened at once under 5/1m, want 5 and 0", admitted, undecided)
		}
	})
	t.Run("redis", func(t *testing.T) {
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
		// A decision that does not come in time is refused (FailClosed), never admitted
		// uncounted: then fewer than 5 get through, never more.
		store := core.WithStore(redisstore.New(rdb, redisstore.WithTimeout(5*time.Second),
			redisstore.WithPrefix(fmt.Sprintf("grpclimit-streams-%d:", time.Now().UnixNano()))))
		admitted, undecided := openAtOnce(t, store, core.WithFailMode(core.FailClosed), core.WithErrorHook(func(context.Context, error) {}))
		if admitted > 5 || admitted+undecided < 5 {
			t.Fatalf("%d streams admitted and %d undecided of 30 opened at once under 5/1m, want 5 admitted, or fewer where as many were undecided", admitted, undecided)
		}
	})
}

// openAtOnce opens 30 bidirectional streams at once under 5/1m, each sending nothing, and
// returns how many the limit admitted (their handler ran) and how many it could not decide.
func openAtOnce(t *testing.T, opts ...core.Option) (admitted, undecided int) {
	t.Helper()
	ic := grpclimit.Must(map[string]string{fullDuplex: "5/1m"}, opts...)
	var ran atomic.Int64
	count := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ran.Add(1)
		return handler(srv, ss)
	}
	conn := serve(t, nil, grpc.ChainStreamInterceptor(ic.Stream(), count))
	client := testpb.NewTestServiceClient(conn)
	var refused, unavailable atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := client.FullDuplexCall(ctx)
			if err == nil {
				_, err = s.Recv() // the stream's end: the handler is unimplemented
			}
			switch status.Code(err) {
			case codes.Unimplemented:
			case codes.ResourceExhausted:
				refused.Add(1)
			case codes.Unavailable:
				unavailable.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got := int(ran.Load()) + int(refused.Load()) + int(unavailable.Load()); got != 30 {
		t.Fatalf("%d admitted, %d refused and %d undecided: %d streams, want 30", ran.Load(), refused.Load(), unavailable.Load(), got)
	}
	return int(ran.Load()), int(unavailable.Load())
}
