package grpclimit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// Options apply to every entry of one New: a Quota given to a New of several entries
// reaches each; it reached only the last, and Reset left the others' grants.
func TestQuotaResetsEveryEntryOfOneNew(t *testing.T) {
	var q core.Quota
	ic := grpclimit.Must(map[string]string{check: "1/1m", emptyCall: "2/1m"},
		fresh(), core.WithScope("auth"), core.WithKey(core.KeyByHeader("user")), core.WithQuota(&q))
	conn := limited(t, ic)
	call := aliceCalls(conn)
	spend(t, call)
	if err := q.Reset(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{check, emptyCall} {
		if got := call(method); got != codes.OK {
			t.Errorf("after Quota.Reset(\"alice\"): %s refused (%v); its grants were not forgotten", method, got)
		}
	}
}

// A process that registers limits only to reset them (an admin process sharing the
// serving processes' store) builds its Interceptors with grpclimit.New and keeps only the
// Quota: every entry of that New stays reached after a collection, not only the last.
func TestQuotaOfAResetOnlyNewReachesEveryEntry(t *testing.T) {
	store := core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now})
	limits := map[string]string{check: "1/1m", emptyCall: "2/1m"}
	opts := []core.Option{core.WithStore(store), core.WithScope("auth"), core.WithKey(core.KeyByHeader("user"))}

	// The serving side.
	serving := grpclimit.Must(limits, opts...)
	conn := limited(t, serving)

	// The admin side: registered only to reach the buckets.
	var q core.Quota
	func() {
		if _, err := grpclimit.New(limits, append(opts, core.WithQuota(&q))...); err != nil {
			t.Fatal(err)
		}
	}()

	call := aliceCalls(conn)
	spend(t, call)
	runtime.GC()
	runtime.GC()
	if err := q.Reset(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{check, emptyCall} {
		if got := call(method); got != codes.OK {
			t.Errorf("after a GC and Quota.Reset(\"alice\"): %s refused (%v); the Quota lost this entry of its New", method, got)
		}
	}
}

// aliceCalls returns a function calling Check or EmptyCall on conn as user alice.
func aliceCalls(conn *grpc.ClientConn) func(method string) codes.Code {
	ctx := metadata.AppendToOutgoingContext(context.Background(), "user", "alice")
	return func(method string) codes.Code {
		var err error
		if method == check {
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		} else {
			_, err = testpb.NewTestServiceClient(conn).EmptyCall(ctx, &testpb.Empty{})
		}
		return status.Code(err)
	}
}

// spend calls Check past its 1/1m and EmptyCall past its 2/1m, wanting the last refused.
func spend(t *testing.T, call func(method string) codes.Code) {
	t.Helper()
	for method, n := range map[string]int{check: 1, emptyCall: 2} {
		for i := range n + 1 {
			want := codes.OK
			if i == n {
				want = codes.ResourceExhausted
			}
			if got := call(method); got != want {
				t.Fatalf("%s call %d: %v, want %v", method, i+1, got, want)
			}
		}
	}
}
