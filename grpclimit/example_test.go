package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/grpclimit"
)

// A server whose health Check is limited to 3 calls an hour per client, and a client that
// calls it 4 times: the fourth is refused, with the wait in a RetryInfo detail.
func Example() {
	limits := grpclimit.Must(map[string]string{
		"/grpc.health.v1.Health/Check": "3/1h",
	}, fresh()) // a store of its own here; core.WithStore(redisstore.New(rdb)) shares one across instances
	s := grpc.NewServer(grpc.UnaryInterceptor(limits.Unary()), grpc.StreamInterceptor(limits.Stream()))
	healthpb.RegisterHealthServer(s, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go s.Serve(lis)
	defer s.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 4 {
		var header metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		if wait, ok := grpclimit.RetryDelay(err); ok {
			fmt.Printf("%v: retry in about %v (retry-after %s)\n", status.Code(err), wait.Round(time.Minute), header.Get("retry-after"))
			continue
		}
		fmt.Println(status.Code(err), header.Get("ratelimit"))
	}
	// Output:
	// OK ["3/1h";r=2;t=3600]
	// OK ["3/1h";r=1;t=3600]
	// OK ["3/1h";r=0;t=3600]
	// ResourceExhausted: retry in about 1h0m0s (retry-after [3600])
}
