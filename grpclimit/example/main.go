// Command example is a gRPC server with reqlimit's limits: helloworld.Greeter/SayHello 3 a
// minute per client, every other Greeter method 100 a minute, and the health service
// unlimited, so that load balancers' probes are never refused.
//
//	go run ./example                # serves on 127.0.0.1:50051 (-addr to change)
//	go run ./example -call 4        # in another terminal: SayHello 4 times
//
// The fourth call fails with ResourceExhausted and a RetryInfo detail saying how long to
// wait. The Greeter service is written out by hand below, so that the example needs no
// protoc: an application registers its generated services the same way.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// newServer returns the server with its limits; opts go to every limit.
func newServer(opts ...core.Option) *grpc.Server {
	limits := grpclimit.Must(map[string]string{
		"/helloworld.Greeter/SayHello": "3/1m",
		"helloworld.Greeter":           "100/1m",
	}, opts...)
	s := grpc.NewServer(grpc.UnaryInterceptor(limits.Unary()), grpc.StreamInterceptor(limits.Stream()))
	s.RegisterService(&greeterDesc, greeter{})
	healthpb.RegisterHealthServer(s, health.NewServer())
	if err := limits.Verify(s.GetServiceInfo()); err != nil {
		log.Fatal(err) // a misspelled name would limit nothing
	}
	return s
}

type greeter struct{}

func (greeter) SayHello(_ context.Context, name *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("hello " + name.GetValue()), nil
}

func (greeter) SayGoodbye(_ context.Context, name *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("goodbye " + name.GetValue()), nil
}

// greeterServer and greeterDesc are what protoc-gen-go-grpc would generate for
//
//	service Greeter {
//	  rpc SayHello (google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  rpc SayGoodbye (google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	}
type greeterServer interface {
	SayHello(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
	SayGoodbye(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

var greeterDesc = grpc.ServiceDesc{
	ServiceName: "helloworld.Greeter",
	HandlerType: (*greeterServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "SayHello", Handler: unary("/helloworld.Greeter/SayHello", greeterServer.SayHello)},
		{MethodName: "SayGoodbye", Handler: unary("/helloworld.Greeter/SayGoodbye", greeterServer.SayGoodbye)},
	},
}

// unary adapts a method to grpc.MethodDesc's handler, running the server's interceptors.
func unary(fullMethod string, m func(greeterServer, context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		handler := func(ctx context.Context, req any) (any, error) {
			return m(srv.(greeterServer), ctx, req.(*wrapperspb.StringValue))
		}
		if interceptor == nil {
			return handler(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, handler)
	}
}

// sayHello calls SayHello on conn, as a generated client would, and returns the reply and
// the response header metadata.
func sayHello(ctx context.Context, conn *grpc.ClientConn, name string) (string, metadata.MD, error) {
	var md metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, "/helloworld.Greeter/SayHello", wrapperspb.String(name), out, grpc.Header(&md))
	return out.GetValue(), md, err
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "listen address, or with -call the server's")
	calls := flag.Int("call", 0, "call SayHello this many times on the server at -addr, instead of serving")
	flag.Parse()
	if *calls > 0 {
		if err := call(os.Stdout, *addr, *calls); err != nil {
			log.Fatal(err)
		}
		return
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving gRPC on %s", lis.Addr())
	log.Fatal(newServer().Serve(lis))
}

// call says hello n times and writes what each call got to w.
func call(w io.Writer, addr string, n int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	for i := 1; i <= n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		reply, md, err := sayHello(ctx, conn, "you")
		cancel()
		rl := strings.Join(md.Get(grpclimit.HeaderRateLimit), ", ")
		switch wait, refused := grpclimit.RetryDelay(err); {
		case err == nil:
			fmt.Fprintf(w, "%d  OK                 ratelimit: %s  %s\n", i, rl, reply)
		case refused:
			fmt.Fprintf(w, "%d  %-17v  ratelimit: %s  retry in %v\n", i, status.Code(err), rl, wait.Round(time.Millisecond))
		default:
			return err
		}
	}
	return nil
}
