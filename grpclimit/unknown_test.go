package grpclimit_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/grpclimit"
)

// With grpc.UnknownServiceHandler (a proxy), the stream interceptor sees calls of any
// name the client writes. Under "*" they share one bucket per client, and one per client
// by service under a service entry, whatever the name: a bucket per made-up name would
// never limit a client that varies it. A method named in the limits keeps its own bucket.
func TestUnknownServiceCallsShareOneBucket(t *testing.T) {
	ic := grpclimit.Must(map[string]string{"*": "2/1m", "proxied.Backend": "2/1m", "/proxied.Backend/Named": "1/1m"}, fresh())
	var reached atomic.Int64
	conn := serve(t, nil, grpc.StreamInterceptor(ic.Stream()), grpc.UnaryInterceptor(ic.Unary()),
		grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
			reached.Add(1) // a proxy would forward the call here
			return nil
		}))
	call := func(method string) codes.Code {
		t.Helper()
		s, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
		if err != nil {
			t.Fatal(err)
		}
		s.CloseSend()
		if err := s.RecvMsg(new(struct{})); err != io.EOF {
			return status.Code(err)
		}
		return codes.OK
	}
	for _, prefix := range []string{"/other.Service/Call", "/proxied.Backend/Call"} {
		admitted := 0
		for i := range 10 {
			switch code := call(prefix + string(rune('A'+i))); code {
			case codes.OK:
				admitted++
			case codes.ResourceExhausted:
			default:
				t.Fatalf("%s%c: %v", prefix, 'A'+i, code)
			}
		}
		if admitted != 2 {
			t.Errorf("calls to 10 made-up names %s*: %d admitted in a minute by a 2/1m limit, want 2", prefix, admitted)
		}
	}
	if got := []codes.Code{call("/proxied.Backend/Named"), call("/proxied.Backend/Named")}; got[0] != codes.OK || got[1] != codes.ResourceExhausted {
		t.Errorf("a method named in the limits (1/1m), called twice: %v, want OK then ResourceExhausted", got)
	}
	if reached.Load() != 5 {
		t.Errorf("the unknown-service handler ran %d times, want 5", reached.Load())
	}
}
