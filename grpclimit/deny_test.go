package grpclimit_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// A deny handler that hands back the err it was given (nil for a call over the limit),
// as one that only logs does, or builds status.Error(codes.OK, ...), which is nil, must
// not turn a refusal into an admission: the call fails with the default error.
func TestDenyHandlerReturningNilStillRefuses(t *testing.T) {
	var served atomic.Int64
	deny := grpclimit.WithDenyHandler(func(ctx context.Context, method string, d core.Decision, err error) error {
		return err // log-and-pass-through: nil for a call over the limit
	})
	ic := grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), deny)
	conn := serve(t, &healthService{onCheck: func(context.Context) { served.Add(1) }},
		grpc.UnaryInterceptor(ic.Unary()), grpc.StreamInterceptor(ic.Stream()))
	codesSeen := make([]codes.Code, 0, 5)
	for range 5 {
		_, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
		codesSeen = append(codesSeen, status.Code(err))
	}
	if n := served.Load(); n != 1 {
		t.Errorf("limit 1/1m: the handler ran %d times for 5 calls (codes %v); want 1: a refused call reached the handler", n, codesSeen)
	}
	for i, c := range codesSeen[1:] {
		if c != codes.ResourceExhausted {
			t.Errorf("call %d: code %v, want the default ResourceExhausted", i+2, c)
		}
	}
}

// The same for a stream: a refused stream's handler never runs.
func TestDenyHandlerReturningNilStillRefusesStreams(t *testing.T) {
	var opened atomic.Int64
	deny := grpclimit.WithDenyHandler(func(context.Context, string, core.Decision, error) error { return nil })
	ic := grpclimit.Must(map[string]string{watch: "1/1m"}, fresh(), deny)
	s := ic.Stream()
	info := &grpc.StreamServerInfo{FullMethod: watch, IsServerStream: true}
	for i := range 3 {
		err := s(nil, fakeStream{}, info, func(any, grpc.ServerStream) error { opened.Add(1); return nil })
		if i > 0 && status.Code(err) != codes.ResourceExhausted {
			t.Errorf("stream %d: %v, want the default ResourceExhausted", i+1, err)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("limit 1/1m: %d of 3 streams reached the handler; want 1", n)
	}
}

type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context    { return context.Background() }
func (fakeStream) SetHeader(metadata.MD) error { return nil }
