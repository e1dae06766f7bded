package grpclimit_test

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/grpclimit"
)

// grpc passes interceptors no service for the methods of a service registered with a nil
// implementation, as for grpc.UnknownServiceHandler's calls, whose names are the client's
// and share a bucket. Those calls are all bidirectional streams: the one-way stream methods
// of such a service keep buckets of their own; its bidirectional ones share one (the
// stricter answer), unless the service is given an implementation.
func TestNilImplementationStreamMethods(t *testing.T) {
	ic := grpclimit.Must(map[string]string{"*": "1/1m"}, fresh())
	handler := func(any, grpc.ServerStream) error { return nil }
	streams := []grpc.StreamDesc{
		{StreamName: "Server", Handler: handler, ServerStreams: true},
		{StreamName: "Client", Handler: handler, ClientStreams: true},
		{StreamName: "BidiA", Handler: handler, ServerStreams: true, ClientStreams: true},
		{StreamName: "BidiB", Handler: handler, ServerStreams: true, ClientStreams: true},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.StreamInterceptor(ic.Stream()))
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "test.Closures", HandlerType: (*any)(nil), Streams: streams}, nil)
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "test.Implemented", HandlerType: (*any)(nil), Streams: streams}, struct{}{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	call := func(method string, desc grpc.StreamDesc) codes.Code {
		t.Helper()
		// The server's handlers send nothing: a client expecting no stream would call that a
		// cardinality violation, whatever the limit decided.
		desc.ServerStreams = true
		st, err := conn.NewStream(context.Background(), &desc, method)
		if err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		if err := st.RecvMsg(new(struct{})); err != io.EOF {
			return status.Code(err)
		}
		return codes.OK
	}
	for _, svc := range []string{"test.Closures", "test.Implemented"} {
		for _, d := range streams {
			want := codes.OK
			if svc == "test.Closures" && d.StreamName == "BidiB" {
				want = codes.ResourceExhausted // BidiA took the bucket they share
			}
			if got := call("/"+svc+"/"+d.StreamName, d); got != want {
				t.Errorf("first call of %s/%s under \"*\": 1/1m: %v, want %v", svc, d.StreamName, got, want)
			}
		}
	}
}
