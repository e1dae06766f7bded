package grpclimit_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/grpclimit"
)

// Two chained limits of one policy name their members apart by their place on the call,
// as on HTTP ("3/1m", then "3/1m#2"): a client must tell which r= belongs to which quota. Both were named "3/1m", since a gRPC
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

// apart fails t unless md has a member from each of two limits, named by their place on
// the call: the first the rate's own name, the second "#2" added.
func apart(t *testing.T, what string, md metadata.MD) {
	t.Helper()
	for _, key := range []string{grpclimit.HeaderRateLimitPolicy, grpclimit.HeaderRateLimit} {
		members := md.Get(key)
		if len(members) != 2 || memberName(members[0]) != `"3/1m"` || memberName(members[1]) != `"3/1m#2"` {
			t.Errorf("%s: %s %q: want a member from each of the two limits, named \"3/1m\" and \"3/1m#2\"", what, key, members)
		}
	}
}

// memberName is the quoted name at the start of a RateLimit list member.
func memberName(member string) string {
	name, _, _ := strings.Cut(member, ";")
	return name
}

// The legacy fields hold one value over HTTP, the tightest limit's. gRPC metadata can only
// be added to: a chained limit adds its values only when it has fewer calls left than the
// limits before it, so the last value is always the tightest, whatever the chain's order.
func TestChainedLegacyFieldsEndWithTheTightestLimit(t *testing.T) {
	for _, c := range []struct {
		chain          []string // the policies, outermost first
		remaining, lim []string // the second call's values
	}{
		// 4/1m has 2 left, then 2/1m has 0: both add, the tighter last.
		{[]string{"4/1m", "2/1m"}, []string{"2", "0"}, []string{"4", "2"}},
		// 2/1m has 0 left: 4/1m, with 2, leaves its values out.
		{[]string{"2/1m", "4/1m"}, []string{"0"}, []string{"2"}},
		// 5/1m's 3 left is fewer than 10/1m's 8, but more than 2/1m's 0.
		{[]string{"10/1m", "2/1m", "5/1m"}, []string{"8", "0"}, []string{"10", "2"}},
	} {
		t.Run(strings.Join(c.chain, ","), func(t *testing.T) {
			store := fresh()
			var chain []grpc.UnaryServerInterceptor
			for _, p := range c.chain {
				chain = append(chain, grpclimit.Must(map[string]string{"*": p}, store, core.WithHeaders(core.HeadersLegacy)).Unary())
			}
			conn := serve(t, nil, grpc.ChainUnaryInterceptor(chain...))
			md := expect(t, conn, check, codes.OK, codes.OK)[1].header
			if got := md.Get(grpclimit.HeaderRemaining); !slices.Equal(got, c.remaining) {
				t.Errorf("second call: %s %q, want %q", grpclimit.HeaderRemaining, got, c.remaining)
			}
			if got := md.Get(grpclimit.HeaderLimit); !slices.Equal(got, c.lim) {
				t.Errorf("second call: %s %q, want %q", grpclimit.HeaderLimit, got, c.lim)
			}
		})
	}
}
