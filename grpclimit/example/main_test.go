package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// start serves s on a loopback port until the test ends.
func start(t *testing.T, s *grpc.Server) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

var clients atomic.Uint32

// dial connects to addr from a loopback address no earlier call used (Linux routes all of
// 127.0.0.0/8 to lo): the server counts in the process-wide default store, which outlives
// one test run (go test -count=2), and a client's IP is its bucket.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	n := clients.Add(1)
	local := &net.TCPAddr{IP: net.IPv4(127, byte(n>>16), byte(n>>8), byte(n)+1)}
	dialer := func(ctx context.Context, target string) (net.Conn, error) {
		return (&net.Dialer{LocalAddr: local}).DialContext(ctx, "tcp", target)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestLimits(t *testing.T) {
	conn := dial(t, start(t, newServer()))
	ctx := context.Background()
	// The waits count down on the real clock from the first grant, made after first:
	// a minute less at most the time the calls took, which is next to nothing on a
	// machine that keeps up (t=60, retry-after 60), a second or more on a stalled one.
	first := time.Now()
	secondsLeft := func(field string) bool {
		n, err := strconv.Atoi(field)
		return err == nil && n <= 60 && n >= 60-int(math.Ceil(time.Since(first).Seconds()))
	}
	for i := 1; i <= 4; i++ {
		reply, md, err := sayHello(ctx, conn, "test")
		if i <= 3 {
			if err != nil || reply != "hello test" {
				t.Fatalf("SayHello %d: %q, %v", i, reply, err)
			}
			// The rate's own name: no other limit on the call took it.
			got := md.Get(grpclimit.HeaderRateLimit)
			if want := fmt.Sprintf(`"3/1m";r=%d;t=`, 3-i); len(got) != 1 || !strings.HasPrefix(got[0], want) ||
				!secondsLeft(got[0][strings.LastIndex(got[0], want)+len(want):]) {
				t.Errorf("SayHello %d: ratelimit %q, want %s60, less at most the seconds since the first call", i, got, want)
			}
			continue
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("SayHello 4: %v, want ResourceExhausted", err)
		}
		if wait, ok := grpclimit.RetryDelay(err); !ok || wait < time.Minute-time.Since(first) || wait > time.Minute {
			t.Errorf("SayHello 4: RetryInfo %v %v, want just under a minute", wait, ok)
		}
		if got := md.Get(grpclimit.HeaderRetryAfter); len(got) != 1 || !secondsLeft(got[0]) {
			t.Errorf("SayHello 4: retry-after %q, want 60, less at most the seconds since the first call", got)
		}
	}
	// The rest of the service has a limit of its own, and health checks none.
	var out wrapperspb.StringValue
	if err := conn.Invoke(ctx, "/helloworld.Greeter/SayGoodbye", wrapperspb.String("test"), &out); err != nil || out.GetValue() != "goodbye test" {
		t.Fatalf("SayGoodbye: %q, %v", out.GetValue(), err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check %d: %v", i, err)
		}
	}
}

func TestCall(t *testing.T) {
	addr := start(t, newServer(core.WithStore(core.NewMemoryStore(nil))))
	var out strings.Builder
	if err := call(&out, addr, 4); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `;r=2;t=60`) || !strings.Contains(lines[2], "hello you") ||
		!strings.Contains(lines[3], "ResourceExhausted") || !strings.Contains(lines[3], "retry in ") {
		t.Errorf("call printed:\n%s", out.String())
	}
}
