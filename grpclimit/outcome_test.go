package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

const streamingOutput = "/grpc.testing.TestService/StreamingOutputCall"

// outcomeService answers UnaryCall and StreamingOutputCall (after a message for each of
// the request's response_parameters) with the code the request's response_status asks
// for; its message asks for other endings (see ending, and askWatch). When gate is set,
// UnaryCall signals entered and waits for gate to close.
type outcomeService struct {
	testpb.UnimplementedTestServiceServer
	entered chan struct{}
	gate    chan struct{}
}

// Messages of a response_status that ask for something else than its code.
const (
	askPanic    = "panic"    // the handler panics
	askPlain    = "plain"    // an error that is not a gRPC status
	askCanceled = "canceled" // context.Canceled itself
	askDeadline = "deadline" // context.DeadlineExceeded itself
	askWrapped  = "wrapped"  // the code's status error wrapped by fmt.Errorf
	// A stream sends its header and its messages, waits for the client to leave and
	// returns the error of its next Send, as a watch handler does.
	askWatch = "watch"
)

// ending is the error a handler returns for st, or its panic.
func ending(st *testpb.EchoStatus) error {
	code := codes.Code(st.GetCode())
	switch st.GetMessage() {
	case askPanic:
		panic("the handler panicked")
	case askPlain:
		return errors.New("plain error")
	case askCanceled:
		return context.Canceled
	case askDeadline:
		return context.DeadlineExceeded
	case askWrapped:
		return fmt.Errorf("wrapped: %w", status.Error(code, "asked"))
	}
	return status.Error(code, "asked") // nil for OK
}

func (s *outcomeService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s.gate != nil {
		s.entered <- struct{}{}
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := ending(req.GetResponseStatus()); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *outcomeService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, ss grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	watch := req.GetResponseStatus().GetMessage() == askWatch
	if watch {
		if err := ss.SendHeader(nil); err != nil {
			return err
		}
	}
	for range req.GetResponseParameters() {
		if err := ss.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	if watch {
		<-ss.Context().Done()
		// grpc marks the stream done a moment after it cancels its context: a Send in
		// that moment succeeds, and one of the next few fails.
		for range 1_000_000 {
			if err := ss.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
				return err
			}
		}
		return errors.New("no Send failed after the client left")
	}
	return ending(req.GetResponseStatus())
}

// serveOutcome starts a real server of svc on a loopback port with opts and returns a
// client of it; both are stopped when the test ends.
func serveOutcome(t *testing.T, svc *outcomeService, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(s, svc)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// limitedOutcome serves outcomeService with ic's interceptors installed.
func limitedOutcome(t *testing.T, ic *grpclimit.Interceptors) *grpc.ClientConn {
	t.Helper()
	return serveOutcome(t, &outcomeService{}, grpc.UnaryInterceptor(ic.Unary()), grpc.StreamInterceptor(ic.Stream()))
}

// A call makes one call that ends as st asks, and returns the header metadata and error.
type call func(st *testpb.EchoStatus) (metadata.MD, error)

func unaryCaller(conn *grpc.ClientConn) call {
	return func(st *testpb.EchoStatus) (metadata.MD, error) {
		var md metadata.MD
		_, err := testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{ResponseStatus: st}, grpc.Header(&md))
		return md, err
	}
}

// streamCaller asks for streams that send the client sends messages before they end, and
// reads each to its end: its status arrives after the interceptors have returned.
func streamCaller(conn *grpc.ClientConn, sends int) call {
	return func(st *testpb.EchoStatus) (metadata.MD, error) {
		req := &testpb.StreamingOutputCallRequest{ResponseStatus: st, ResponseParameters: make([]*testpb.ResponseParameters, sends)}
		s, err := testpb.NewTestServiceClient(conn).StreamingOutputCall(context.Background(), req)
		if err != nil {
			return nil, err
		}
		for {
			if _, err = s.Recv(); err != nil {
				md, _ := s.Header()
				if err == io.EOF {
					err = nil
				}
				return md, err
			}
		}
	}
}

func ask(code codes.Code) *testpb.EchoStatus { return &testpb.EchoStatus{Code: int32(code)} }

// calls makes n calls that end with code asked and checks that the client got want.
func calls(t *testing.T, c call, n int, asked, want codes.Code) []metadata.MD {
	t.Helper()
	var mds []metadata.MD
	for i := range n {
		md, err := c(ask(asked))
		if got := status.Code(err); got != want {
			t.Fatalf("call %d of %d asking %v: %v (%v), want %v", i+1, n, asked, got, err, want)
		}
		mds = append(mds, md)
	}
	return mds
}

func countWhenLimits(method, policy string, counts func(int) bool, more ...core.Option) *grpclimit.Interceptors {
	return grpclimit.Must(map[string]string{method: policy}, append([]core.Option{fresh(), core.WithCountWhen(counts)}, more...)...)
}

// TestCountWhenFailedUnary: under core.Failed, successful calls give their slot back, and
// failed ones count.
func TestCountWhenFailedUnary(t *testing.T) {
	var rec recorder
	conn := limitedOutcome(t, countWhenLimits(unaryCall, "3/1m", core.Failed, rec.option()))
	// Each OK call was given back before the next one was decided: all see 2 left.
	for i, md := range calls(t, unaryCaller(conn), 5, codes.OK, codes.OK) {
		if got := field(md, grpclimit.HeaderRateLimit); len(got) != 1 || got[0] != `"3/1m";r=2;t=60` {
			t.Errorf("OK call %d: ratelimit %q, want r=2: the earlier calls were given back", i+1, got)
		}
	}
	calls(t, unaryCaller(conn), 3, codes.Unauthenticated, codes.Unauthenticated)
	calls(t, unaryCaller(conn), 1, codes.Unauthenticated, codes.ResourceExhausted)
	calls(t, unaryCaller(conn), 1, codes.OK, codes.ResourceExhausted)

	released := 0
	for _, e := range rec.all() {
		if e.Outcome == core.Released {
			released++
		}
	}
	if released != 5 {
		t.Errorf("%d Released events, want one for each of the 5 OK calls", released)
	}
}

// TestCountWhenSucceededUnary: under core.Succeeded, failed calls give their slot back,
// and successful ones count.
func TestCountWhenSucceededUnary(t *testing.T) {
	c := unaryCaller(limitedOutcome(t, countWhenLimits(unaryCall, "3/1m", core.Succeeded)))
	calls(t, c, 3, codes.InvalidArgument, codes.InvalidArgument)
	calls(t, c, 3, codes.Internal, codes.Internal)
	calls(t, c, 3, codes.OK, codes.OK)
	calls(t, c, 1, codes.OK, codes.ResourceExhausted)
	calls(t, c, 1, codes.Unauthenticated, codes.ResourceExhausted)
}

// TestCountWhenStream: a stream that sent nothing is settled by the code its handler ends
// it with; one that sent a message counts under core.Succeeded whatever its code, and
// under core.Failed by its code.
func TestCountWhenStream(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		conn := limitedOutcome(t, countWhenLimits(streamingOutput, "3/1m", core.Failed))
		calls(t, streamCaller(conn, 1), 5, codes.OK, codes.OK)
		calls(t, streamCaller(conn, 0), 5, codes.OK, codes.OK)
		// A refusal after a message (a login's challenge) is a failure all the same.
		calls(t, streamCaller(conn, 1), 3, codes.PermissionDenied, codes.PermissionDenied)
		calls(t, streamCaller(conn, 0), 1, codes.PermissionDenied, codes.ResourceExhausted)
		calls(t, streamCaller(conn, 1), 1, codes.OK, codes.ResourceExhausted)
	})
	t.Run("failed before sending", func(t *testing.T) {
		c := streamCaller(limitedOutcome(t, countWhenLimits(streamingOutput, "3/1m", core.Failed)), 0)
		calls(t, c, 3, codes.Unauthenticated, codes.Unauthenticated)
		calls(t, c, 1, codes.OK, codes.ResourceExhausted)
	})
	t.Run("succeeded", func(t *testing.T) {
		conn := limitedOutcome(t, countWhenLimits(streamingOutput, "3/1m", core.Succeeded))
		calls(t, streamCaller(conn, 0), 5, codes.NotFound, codes.NotFound)
		calls(t, streamCaller(conn, 1), 3, codes.OK, codes.OK)
		calls(t, streamCaller(conn, 1), 1, codes.OK, codes.ResourceExhausted)
		calls(t, streamCaller(conn, 0), 1, codes.NotFound, codes.ResourceExhausted)
	})
	t.Run("succeeded, served then failed", func(t *testing.T) {
		conn := limitedOutcome(t, countWhenLimits(streamingOutput, "3/1m", core.Succeeded))
		calls(t, streamCaller(conn, 2), 3, codes.Internal, codes.Internal)
		calls(t, streamCaller(conn, 0), 1, codes.Internal, codes.ResourceExhausted)
	})
}

// TestCountWhenInFlight: calls in flight hold their slots, so no more than the limit run
// at once; once they answer with a code that does not count, their slots are free again.
func TestCountWhenInFlight(t *testing.T) {
	const limit, callers = 5, 8
	svc := &outcomeService{entered: make(chan struct{}, 4*callers), gate: make(chan struct{})}
	ic := countWhenLimits(unaryCall, fmt.Sprintf("%d/1m", limit), core.Failed)
	conn := serveOutcome(t, svc, grpc.UnaryInterceptor(ic.Unary()))
	c := unaryCaller(conn)

	done := make(chan error, callers)
	for range callers {
		go func() {
			_, err := c(ask(codes.OK))
			done <- err
		}()
	}
	// Every caller either enters the handler, where it waits for the gate, or is refused.
	admitted, refused := 0, 0
	for range callers {
		select {
		case <-svc.entered:
			admitted++
		case err := <-done:
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("a call ended before the gate opened with %v, want ResourceExhausted", err)
			}
			refused++
		}
	}
	if admitted != limit || refused != callers-limit {
		t.Fatalf("%d calls admitted and %d refused while in flight, want %d and %d", admitted, refused, limit, callers-limit)
	}
	close(svc.gate)
	for range admitted {
		if err := <-done; err != nil {
			t.Fatalf("an admitted call: %v", err)
		}
	}
	// Their slots were given back when they answered OK.
	calls(t, c, limit, codes.OK, codes.OK)
}

// recoverer is a recovery interceptor, installed before the limits: it turns a handler's
// panic into codes.Internal.
type recoverer struct{ panics atomic.Int64 }

func (r *recoverer) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (reply any, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.panics.Add(1)
			reply, err = nil, status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return handler(ctx, req)
}

func (r *recoverer) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.panics.Add(1)
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return handler(srv, ss)
}

// TestCountWhenPanicKeepsSlot: a handler that panics is not settled, so its call counts
// even under a rule that gives back the Internal a recovery interceptor makes of it.
func TestCountWhenPanicKeepsSlot(t *testing.T) {
	var rec recoverer
	ic := grpclimit.Must(map[string]string{unaryCall: "2/1m", streamingOutput: "1/1m"}, fresh(), core.WithCountWhen(core.Succeeded))
	conn := serveOutcome(t, &outcomeService{},
		grpc.ChainUnaryInterceptor(rec.unary, ic.Unary()),
		grpc.ChainStreamInterceptor(rec.stream, ic.Stream()))
	panicking := &testpb.EchoStatus{Message: askPanic}

	u := unaryCaller(conn)
	calls(t, u, 3, codes.Unauthenticated, codes.Unauthenticated) // given back
	for i := range 2 {
		if _, err := u(panicking); status.Code(err) != codes.Internal {
			t.Fatalf("panicking call %d: %v, want Internal from the recovery interceptor", i+1, err)
		}
	}
	calls(t, u, 1, codes.Unauthenticated, codes.ResourceExhausted)

	s := streamCaller(conn, 0)
	calls(t, s, 2, codes.Unauthenticated, codes.Unauthenticated) // given back
	if _, err := s(panicking); status.Code(err) != codes.Internal {
		t.Fatalf("panicking stream: %v, want Internal from the recovery interceptor", err)
	}
	calls(t, s, 1, codes.Unauthenticated, codes.ResourceExhausted)

	if n := rec.panics.Load(); n != 3 {
		t.Errorf("the recovery interceptor saw %d panics, want 3: the panics must reach it", n)
	}
}

// TestCountWhenStatusMapping: the rule sees the HTTP status grpc-gateway's
// runtime.HTTPStatusFromCode gives the code the server sends.
func TestCountWhenStatusMapping(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	rule := func(s int) bool {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		return true
	}
	type asking struct {
		st   *testpb.EchoStatus
		sent codes.Code // what the client gets
		want int        // what the rule sees
	}
	var cases []asking
	for code, want := range []int{
		codes.OK: 200, codes.Canceled: 499, codes.Unknown: 500, codes.InvalidArgument: 400,
		codes.DeadlineExceeded: 504, codes.NotFound: 404, codes.AlreadyExists: 409,
		codes.PermissionDenied: 403, codes.ResourceExhausted: 429, codes.FailedPrecondition: 400,
		codes.Aborted: 409, codes.OutOfRange: 400, codes.Unimplemented: 501, codes.Internal: 500,
		codes.Unavailable: 503, codes.DataLoss: 500, codes.Unauthenticated: 401,
		42: 500, // not a code gRPC defines
	} {
		if want != 0 {
			cases = append(cases, asking{ask(codes.Code(code)), codes.Code(code), want})
		}
	}
	cases = append(cases,
		asking{&testpb.EchoStatus{Message: askPlain}, codes.Unknown, 500},
		asking{&testpb.EchoStatus{Message: askCanceled}, codes.Canceled, 499},
		asking{&testpb.EchoStatus{Message: askDeadline}, codes.DeadlineExceeded, 504},
		asking{&testpb.EchoStatus{Code: int32(codes.NotFound), Message: askWrapped}, codes.NotFound, 404},
	)
	ic := grpclimit.Must(map[string]string{unaryCall: "1000/1m", streamingOutput: "1000/1m"}, fresh(), core.WithCountWhen(rule))
	conn := limitedOutcome(t, ic)
	for _, k := range []struct {
		kind string
		c    call
	}{{"unary", unaryCaller(conn)}, {"stream", streamCaller(conn, 0)}} {
		kind, c := k.kind, k.c
		for _, a := range cases {
			if _, err := c(a.st); status.Code(err) != a.sent {
				t.Fatalf("%s call asking code %v %q: the client got %v, want %v", kind, codes.Code(a.st.GetCode()), a.st.GetMessage(), err, a.sent)
			}
			mu.Lock()
			got := seen
			seen = nil
			mu.Unlock()
			if len(got) != 1 || got[0] != a.want {
				t.Errorf("%s call asking code %v %q: the rule saw %v, want [%d]", kind, codes.Code(a.st.GetCode()), a.st.GetMessage(), got, a.want)
			}
		}
	}
}

// TestCountWhenBadOptions: New refuses a rule it cannot apply, naming the entry.
func TestCountWhenBadOptions(t *testing.T) {
	for _, c := range []struct {
		opts []core.Option
		want string
	}{
		{[]core.Option{core.WithStore(failingStore{}), core.WithCountWhen(core.Failed)}, "core.Releaser"},
		{[]core.Option{fresh(), core.WithPenalty(), core.WithCountWhen(core.Failed)}, "WithPenalty"},
		{[]core.Option{fresh(), core.WithCountWhen(nil)}, "WithCountWhen(nil)"},
	} {
		_, err := grpclimit.New(map[string]string{unaryCall: "3/1m"}, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), unaryCall) {
			t.Errorf("New: %v, want an error naming %s and saying %s", err, unaryCall, c.want)
		}
	}
}
