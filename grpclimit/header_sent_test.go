package grpclimit_test

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/grpclimit"
)

// TestFieldsGoInTheTrailerOnceTheHeaderWasSent: an interceptor that runs before the limit
// and sends the header metadata itself (a server name, a request id) left the limit's
// SetHeader failing, and the RateLimit fields and retry-after were dropped without a word,
// on admitted and refused calls alike. They go in the trailer metadata then.
func TestFieldsGoInTheTrailerOnceTheHeaderWasSent(t *testing.T) {
	early := metadata.Pairs("x-request-id", "1")
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := grpc.SendHeader(ctx, early); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := ss.SendHeader(early); err != nil {
			return err
		}
		return handler(srv, ss)
	}
	ic := grpclimit.Must(map[string]string{check: "1/1m", watch: "1/1m"}, fresh())
	conn := serve(t, nil, grpc.ChainUnaryInterceptor(unary, ic.Unary()), grpc.ChainStreamInterceptor(stream, ic.Stream()))
	health := healthpb.NewHealthClient(conn)

	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		var header, trailer metadata.MD
		_, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		checkFields(t, "unary call", i, want, err, header, trailer)
	}
	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		var header, trailer metadata.MD
		s, err := health.Watch(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		for err == nil {
			_, err = s.Recv()
		}
		if err == io.EOF {
			err = nil
		}
		checkFields(t, "stream", i, want, err, header, trailer)
	}
}

// checkFields checks that call i ended with want, and that the limit's fields reached the
// client, in the trailer since the header had gone before the limit decided.
func checkFields(t *testing.T, what string, i int, want codes.Code, err error, header, trailer metadata.MD) {
	t.Helper()
	if status.Code(err) != want || len(header.Get("x-request-id")) != 1 {
		t.Fatalf("%s %d: %v, header %v; want %v and the early header", what, i+1, err, header, want)
	}
	got := trailer.Get(grpclimit.HeaderRateLimit)
	if len(got) != 1 || len(trailer.Get(grpclimit.HeaderRateLimitPolicy)) != 1 {
		t.Errorf("%s %d (%v): trailer ratelimit %q, ratelimit-policy %q; want the limit's fields", what, i+1, want, got, trailer.Get(grpclimit.HeaderRateLimitPolicy))
	}
	if ra := trailer.Get(grpclimit.HeaderRetryAfter); (want == codes.ResourceExhausted) != (len(ra) == 1) {
		t.Errorf("%s %d (%v): trailer retry-after %q", what, i+1, want, ra)
	}
}
