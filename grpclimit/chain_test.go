package grpclimit_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// Two chained limits of one policy name their members apart, as on HTTP ("3/1m#2"): a
// client must tell which r= belongs to which quota. Both were named "3/1m", since a gRPC
// server cannot read back the header metadata an earlier interceptor set.
func TestChainedLimitsOfOnePolicyNameTheirMembersApart(t *testing.T) {
	store := fresh()
	wide := grpclimit.Must(map[string]string{"*": "3/1m"}, store)
	strict := grpclimit.Must(map[string]string{check: "3/1m", watch: "3/1m"}, store, core.WithKey(core.KeyByHeader("x-api-key")))
	conn := serve(t, nil, grpc.ChainUnaryInterceptor(wide.Unary(), strict.Unary()),
		grpc.ChainStreamInterceptor(wide.Stream(), strict.Stream()))

	r := invoke(t, conn, check)
	if r.code != codes.OK {
		t.Fatalf("unary call: %v", r.err)
	}
	apart(t, "unary", r.header)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	md, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	apart(t, "stream", md)
}

// apart fails t unless md has a member from each of two limits, named apart.
func apart(t *testing.T, what string, md metadata.MD) {
	t.Helper()
	for _, key := range []string{grpclimit.HeaderRateLimitPolicy, grpclimit.HeaderRateLimit} {
		members := md.Get(key) // not field, which erases the names' "#N"
		if len(members) != 2 {
			t.Errorf("%s: %s %q: want a member from each of the two limits", what, key, members)
			continue
		}
		if a, b := memberName(members[0]), memberName(members[1]); a == b {
			t.Errorf("%s: %s %q: both members named %s", what, key, members, a)
		}
	}
}

// memberName is the quoted name at the start of a RateLimit list member.
func memberName(member string) string {
	name, _, _ := strings.Cut(member, ";")
	return name
}
