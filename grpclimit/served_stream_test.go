package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// watchServer serves outcomeService behind ic's stream interceptor, chained after one
// that hands on the error each stream ended with once ic's interceptor has returned, so
// that a test knows when ic has settled a stream.
func watchServer(t *testing.T, ic *grpclimit.Interceptors) (testpb.TestServiceClient, <-chan error) {
	t.Helper()
	ended := make(chan error, 1)
	report := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		ended <- err
		return err
	}
	conn := serveOutcome(t, &outcomeService{}, grpc.ChainStreamInterceptor(report, ic.Stream()))
	return testpb.NewTestServiceClient(conn), ended
}

// watchAndLeave opens a watch stream that sends updates messages, reads them and cancels, as a
// client that had what it wanted does; with no updates, it cancels once the stream's
// header arrived. It returns the error the client saw (nil when it read every update)
// and, when the stream was admitted, the one the handler ended it with.
func watchAndLeave(t *testing.T, c testpb.TestServiceClient, ended <-chan error, updates int) (seen, handler error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := &testpb.StreamingOutputCallRequest{
		ResponseStatus:     &testpb.EchoStatus{Message: askWatch},
		ResponseParameters: make([]*testpb.ResponseParameters, updates),
	}
	s, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatalf("opening a stream: %v", err)
	}
	if updates == 0 {
		_, err = s.Header()
	}
	for range updates {
		if _, err = s.Recv(); err != nil {
			break
		}
	}
	if err == nil {
		cancel()
	}
	// The server settles the stream before it answers the next: wait for the interceptor.
	select {
	case handler = <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("the stream's interceptor did not return a minute after the client (%v) left", err)
	}
	return err, handler
}

// TestServedStreamCountsUnderSucceeded: under core.Succeeded, a stream whose client reads
// its updates and cancels was served, and counts although its handler ends with Canceled
// (the error of its last Send): the fourth such stream in the window is refused. A stream
// the client cancels before any update was not served, and does not count.
func TestServedStreamCountsUnderSucceeded(t *testing.T) {
	c, ended := watchServer(t, countWhenLimits(streamingOutput, "3/1m", core.Succeeded))
	for i := range 5 {
		seen, handler := watchAndLeave(t, c, ended, 0)
		if seen != nil || status.Code(handler) != codes.Canceled {
			t.Fatalf("stream %d cancelled before any update: the client saw %v and the handler ended with %v, want nil and Canceled", i+1, seen, handler)
		}
	}
	served := 0
	for i := range 10 {
		seen, handler := watchAndLeave(t, c, ended, 3)
		switch {
		case seen == nil:
			served++
			if status.Code(handler) != codes.Canceled {
				t.Fatalf("served stream %d: the handler ended with %v, want Canceled, the error of a Send after the client left", i+1, handler)
			}
		case status.Code(seen) != codes.ResourceExhausted:
			t.Fatalf("stream %d: the client saw %v, want every update or ResourceExhausted", i+1, seen)
		}
		if want := min(i+1, 3); served != want {
			t.Fatalf("after %d streams read and cancelled, %d were served, want %d: a served stream counts under core.Succeeded", i+1, served, want)
		}
	}
}

// TestServedStreamUnderFailed: under core.Failed, a stream the client cancels after being
// served is no failed attempt and does not count; one the client cancels before any
// message counts, as a unary call abandoned before its answer does.
func TestServedStreamUnderFailed(t *testing.T) {
	t.Run("cancelled after an update", func(t *testing.T) {
		c, ended := watchServer(t, countWhenLimits(streamingOutput, "3/1m", core.Failed))
		for i := range 6 {
			seen, handler := watchAndLeave(t, c, ended, 1)
			if seen != nil || status.Code(handler) != codes.Canceled {
				t.Fatalf("stream %d read and cancelled: the client saw %v and the handler ended with %v, want nil and Canceled: served streams do not count under core.Failed", i+1, seen, handler)
			}
		}
	})
	t.Run("cancelled before any update", func(t *testing.T) {
		c, ended := watchServer(t, countWhenLimits(streamingOutput, "3/1m", core.Failed))
		for i := range 3 {
			if seen, handler := watchAndLeave(t, c, ended, 0); seen != nil || status.Code(handler) != codes.Canceled {
				t.Fatalf("stream %d cancelled before any update: the client saw %v and the handler ended with %v, want nil and Canceled", i+1, seen, handler)
			}
		}
		if seen, _ := watchAndLeave(t, c, ended, 1); status.Code(seen) != codes.ResourceExhausted {
			t.Fatalf("a fourth stream: the client saw %v, want ResourceExhausted: a stream cancelled before any message counts under core.Failed", seen)
		}
	})
}
