package grpclimit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// TestForwardedMetadataFromLoopbackWarnsOnce: calls that reach the server from loopback
// with x-forwarded-for, as through a proxy on the same host (Envoy adds it), share the
// proxy's bucket when nobody trusted it. The limit warns once, naming the fix, though no
// option of the limit reads the call's metadata.
func TestForwardedMetadataFromLoopbackWarnsOnce(t *testing.T) {
	var mu sync.Mutex
	var warned []string
	hook := core.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); warned = append(warned, err.Error()); mu.Unlock() })
	conn := limited(t, grpclimit.Must(map[string]string{check: "2/1m"}, fresh(), hook))
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "198.51.100."+string(rune('1'+i)))
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if got := status.Code(err); got != want {
			t.Fatalf("call %d: %v, want %v", i+1, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warned) != 1 || !strings.Contains(warned[0], `core.WithTrustedProxies("127.0.0.1")`) || !strings.Contains(warned[0], check) {
		t.Errorf("warnings %q, want one naming core.WithTrustedProxies(\"127.0.0.1\") and the method", warned)
	}
}
