package grpclimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// waitingStore answers only when the call's context ends, as a store across a network
// does when the call's deadline passes first.
type waitingStore struct{}

func (waitingStore) Decide(ctx context.Context, _ core.Query) (core.Decision, error) {
	<-ctx.Done()
	return core.Decision{}, fmt.Errorf("redis: %w", ctx.Err())
}

// TestCallGoneBeforeTheStoreAnsweredIsUnavailable: a call whose own context ends before
// the store answers is refused in every fail mode (admitted uncounted, a client could skip
// the limit by setting a short deadline), as docs/grpc.md's table says: Unavailable, "rate
// limit unavailable", a RetryInfo of one second; the handler never runs.
func TestCallGoneBeforeTheStoreAnsweredIsUnavailable(t *testing.T) {
	for _, mode := range []core.FailMode{core.FailOpen, core.FailClosed, core.FailLocal} {
		ic := grpclimit.Must(map[string]string{check: "3/1m"}, core.WithStore(waitingStore{}),
			core.WithFailMode(mode), core.WithErrorHook(func(context.Context, error) {}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		ran := false
		_, err := ic.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: check}, func(context.Context, any) (any, error) {
			ran = true
			return "done", nil
		})
		cancel()
		if ran || status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "rate limit unavailable" {
			t.Errorf("%v: handler ran %v, error %v; want Unavailable, \"rate limit unavailable\", not run", mode, ran, err)
		}
		if wait, ok := grpclimit.RetryDelay(err); !ok || wait != time.Second {
			t.Errorf("%v: RetryInfo %v %v, want one second", mode, wait, ok)
		}
	}
}
