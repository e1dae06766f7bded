package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/grpclimit"
)

const (
	check     = "/grpc.health.v1.Health/Check"
	watch     = "/grpc.health.v1.Health/Watch"
	emptyCall = "/grpc.testing.TestService/EmptyCall"
	unaryCall = "/grpc.testing.TestService/UnaryCall"
	cacheable = "/grpc.testing.TestService/CacheableUnaryCall"
)

// healthService answers Check, and Watch with one message; onCheck, when set, sees every
// Check the interceptors let through.
type healthService struct {
	healthpb.UnimplementedHealthServer
	onCheck func(ctx context.Context)
}

func (h *healthService) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.onCheck != nil {
		h.onCheck(ctx)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *healthService) Watch(_ *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// testService answers the test service's unary calls with empty messages.
type testService struct {
	testpb.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (testService) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

func (testService) CacheableUnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{}, nil
}

// serve starts a real server on a loopback port with opts and returns a client of it; both
// are stopped when the test ends.
func serve(t testing.TB, h *healthService, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	if h == nil {
		h = &healthService{}
	}
	healthpb.RegisterHealthServer(s, h)
	testpb.RegisterTestServiceServer(s, testService{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// limited serves with ic's interceptors installed.
func limited(t testing.TB, ic *grpclimit.Interceptors) *grpc.ClientConn {
	t.Helper()
	return serve(t, nil, grpc.UnaryInterceptor(ic.Unary()), grpc.StreamInterceptor(ic.Stream()))
}

// fresh is a store of the test's own: every test's calls come from 127.0.0.1. Its clock
// stands still, so that the waits the tests want exactly (t=60, a RetryInfo delay above
// 59 s) do not shrink on a machine that stalls between calls.
func fresh() core.Option {
	return core.WithStore(core.NewMemoryStore(&core.MemoryConfig{Now: storetest.NewManualClock(time.Unix(0, 0)).Now}))
}

// A result is what a client saw of one call.
type result struct {
	code   codes.Code
	header metadata.MD
	err    error
}

func healthCheck(t testing.TB, conn *grpc.ClientConn, ctx context.Context) result {
	t.Helper()
	var md metadata.MD
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	return result{status.Code(err), md, err}
}

func invoke(t testing.TB, conn *grpc.ClientConn, method string) result {
	t.Helper()
	var md metadata.MD
	var err error
	c := testpb.NewTestServiceClient(conn)
	ctx := context.Background()
	switch method {
	case emptyCall:
		_, err = c.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&md))
	case unaryCall:
		_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&md))
	case cacheable:
		_, err = c.CacheableUnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&md))
	case check:
		return healthCheck(t, conn, ctx)
	default:
		t.Fatalf("no client for %s", method)
	}
	return result{status.Code(err), md, err}
}

// expect checks the codes of calls to method, in order.
func expect(t *testing.T, conn *grpc.ClientConn, method string, want ...codes.Code) []result {
	t.Helper()
	var got []result
	for i, w := range want {
		r := invoke(t, conn, method)
		if r.code != w {
			t.Fatalf("%s call %d: %v (%v), want %v", method, i+1, r.code, r.err, w)
		}
		got = append(got, r)
	}
	return got
}

// field returns the values of a RateLimit field. A member's name is its rate's ("3/1m"),
// "#2" added only where an earlier limit on the call took that name.
func field(md metadata.MD, key string) []string { return md.Get(key) }

func ok(n int) []codes.Code {
	c := make([]codes.Code, n)
	for i := range c {
		c[i] = codes.OK
	}
	return c
}

// recorder is an observer that keeps the events.
type recorder struct {
	mu     sync.Mutex
	events []core.Event
}

func (r *recorder) option() core.Option {
	return core.WithObserver(func(e core.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() })
}

func (r *recorder) all() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Event(nil), r.events...)
}

func TestAdmitsThenRefusesWithRetryInfo(t *testing.T) {
	var rec recorder
	conn := limited(t, grpclimit.Must(map[string]string{check: "3/1m"}, fresh(), rec.option()))
	rs := expect(t, conn, check, codes.OK, codes.OK, codes.OK, codes.ResourceExhausted)
	for i, want := range []string{`"3/1m";r=2;t=60`, `"3/1m";r=1;t=60`, `"3/1m";r=0;t=60`, `"3/1m";r=0;t=60`} {
		h := rs[i].header
		if got := field(h, grpclimit.HeaderRateLimit); len(got) != 1 || got[0] != want {
			t.Errorf("call %d: ratelimit %q, want %q", i+1, got, want)
		}
		if got := field(h, grpclimit.HeaderRateLimitPolicy); len(got) != 1 || got[0] != `"3/1m";q=3;w=60` {
			t.Errorf("call %d: ratelimit-policy %q", i+1, got)
		}
		if got, want := h.Get(grpclimit.HeaderRetryAfter), map[bool]int{true: 1, false: 0}[i == 3]; len(got) != want {
			t.Errorf("call %d: retry-after %q", i+1, got)
		}
	}
	refused := rs[3]
	if got := refused.header.Get(grpclimit.HeaderRetryAfter); len(got) != 1 || got[0] != "60" {
		t.Errorf("refusal: retry-after %q, want 60", got)
	}
	if msg := status.Convert(refused.err).Message(); msg != "Too Many Requests" {
		t.Errorf("refusal message %q", msg)
	}
	wait, ok := grpclimit.RetryDelay(refused.err)
	if !ok {
		t.Fatalf("refusal %v has no RetryInfo", refused.err)
	}
	events := rec.all()
	if len(events) != 4 || events[3].Outcome != core.Refused {
		t.Fatalf("events %+v, want 3 admitted then a refusal", events)
	}
	if want := events[3].Decision.RetryAfter; wait != want {
		t.Errorf("RetryInfo delay %v, want the decision's exact wait %v", wait, want)
	}
	if wait <= 59*time.Second || wait > time.Minute {
		t.Errorf("RetryInfo delay %v, want just under a minute", wait)
	}
	if events[0].Scope != check {
		t.Errorf("event scope %q, want the full method", events[0].Scope)
	}
	if events[0].Key != "127.0.0.1" {
		t.Errorf("event key %q, want the peer's IP", events[0].Key)
	}
}

func TestUnlistedMethodsAreNotLimited(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{emptyCall: "1/1m"}, fresh()))
	rs := expect(t, conn, unaryCall, ok(5)...)
	if md := rs[0].header; len(md.Get(grpclimit.HeaderRateLimit)) != 0 {
		t.Errorf("an unlimited method got rate-limit metadata: %v", md)
	}
	expect(t, conn, emptyCall, codes.OK, codes.ResourceExhausted)
}

func TestMostSpecificEntryWins(t *testing.T) {
	ic := grpclimit.Must(map[string]string{
		emptyCall:                  "1/1m",
		"grpc.testing.TestService": "2/1m",
		"*":                        "3/1m",
	}, fresh())
	for method, want := range map[string]string{emptyCall: "1/1m", unaryCall: "2/1m", cacheable: "2/1m", check: "3/1m", "/other.Service/Method": "3/1m"} {
		if p := ic.Policy(method); p == nil || p.String() != want {
			t.Errorf("Policy(%q) = %v, want %s", method, p, want)
		}
	}
	conn := limited(t, ic)
	expect(t, conn, emptyCall, codes.OK, codes.ResourceExhausted)
	// Each method under the service entry has buckets of its own.
	expect(t, conn, unaryCall, codes.OK, codes.OK, codes.ResourceExhausted)
	expect(t, conn, cacheable, codes.OK, codes.OK, codes.ResourceExhausted)
	expect(t, conn, check, codes.OK, codes.OK, codes.OK, codes.ResourceExhausted)

	// Without "*", a method of another service is not limited.
	ic = grpclimit.Must(map[string]string{"/grpc.testing.TestService/": "1/1m"}, fresh())
	if p := ic.Policy(check); p != nil {
		t.Errorf("Policy(%q) = %v, want nil", check, p)
	}
	conn = limited(t, ic)
	expect(t, conn, check, ok(3)...)
	expect(t, conn, unaryCall, codes.OK, codes.ResourceExhausted)
}

func TestScopeSharesOneBucket(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{"grpc.testing.TestService": "2/1m"}, fresh(), core.WithScope("testservice")))
	expect(t, conn, unaryCall, codes.OK)
	expect(t, conn, cacheable, codes.OK, codes.ResourceExhausted)
	expect(t, conn, emptyCall, codes.ResourceExhausted)
}

func TestBadLimits(t *testing.T) {
	for _, c := range []struct {
		limits map[string]string
		opts   []core.Option
		want   []string
	}{
		{map[string]string{"/helloworld.Greeter/SayHello": "3/0s"}, nil, []string{`"/helloworld.Greeter/SayHello"`, `"3/0s"`, "grpclimit_test.go:"}},
		{map[string]string{"helloworld.Greeter": "3"}, nil, []string{`"helloworld.Greeter"`, `policy "3"`}},
		{map[string]string{"*": "3/60ns"}, nil, []string{`"*"`, "below the 1ms minimum"}},
		{map[string]string{"/a.B/C": "3/1m", "/a.B/D": "x/1m"}, nil, []string{`"/a.B/D"`, `"x/1m"`}},
		{map[string]string{"": "3/1m"}, nil, []string{`bad method ""`}},
		{map[string]string{"/": "3/1m"}, nil, []string{`bad method "/"`}},
		{map[string]string{"/a.B/C/D": "3/1m"}, nil, []string{`bad method "/a.B/C/D"`, "too many slashes"}},
		{map[string]string{"/a.B//": "3/1m"}, nil, []string{`bad method "/a.B//"`, "no method name"}},
		{map[string]string{"a.*": "3/1m"}, nil, []string{`bad method "a.*"`, "wildcard"}},
		{map[string]string{" a.B": "3/1m"}, nil, []string{`bad method " a.B"`, "space"}},
		{map[string]string{"a.B": "3/1m", "/a.B/": "4/1m"}, nil, []string{`"/a.B/"`, `"a.B"`, "both name a.B"}},
		{map[string]string{"/a.B/C": "3/1m", "a.B/C": "4/1m"}, nil, []string{`"/a.B/C"`, `"a.B/C"`}},
		{nil, nil, []string{"no limits"}},
		{map[string]string{"a.B": "3/1m"}, []core.Option{core.WithFailStatus(200)}, []string{`"a.B"`, "200"}},
		{map[string]string{"a.B": "3/1m"}, []core.Option{core.WithClientIPFromFramework()}, []string{`"a.B"`, "WithTrustedProxies"}},
	} {
		_, err := grpclimit.New(c.limits, c.opts...)
		if err == nil {
			t.Errorf("New(%q): no error", c.limits)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%q): error %q does not say %s", c.limits, err, w)
			}
		}
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			grpclimit.Must(c.limits, c.opts...)
			return "no panic"
		}()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Must(%q) panicked with %q, which does not say %s", c.limits, msg, w)
			}
		}
	}
	if _, err := grpclimit.New(map[string]string{"a.B": "3/1m,"}); !errors.Is(err, core.ErrBadPolicy) {
		t.Errorf("a bad policy's error %v does not wrap core.ErrBadPolicy", err)
	}
	for _, name := range []string{"*", "a.B", "/a.B", "/a.B/", "a.B/C", "/a.B/C", "/helloworld.Greeter/SayHello", "pkg.v1.Service_2/Method_2"} {
		if _, err := grpclimit.New(map[string]string{name: "3/1m, 10/1h"}); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
}

func TestStreamLimitsOpens(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{watch: "2/1m"}, fresh()))
	open := func() (metadata.MD, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return nil, err
		}
		// Each message of a stream is free: only the stream is counted.
		_, err = s.Recv()
		md, _ := s.Header()
		return md, err
	}
	for i := 1; i <= 3; i++ {
		md, err := open()
		if want := map[bool]codes.Code{true: codes.ResourceExhausted, false: codes.OK}[i == 3]; status.Code(err) != want {
			t.Fatalf("stream %d: %v, want %v", i, err, want)
		}
		want := fmt.Sprintf(`"2/1m";r=%d;t=60`, max(0, 2-i))
		if got := field(md, grpclimit.HeaderRateLimit); len(got) != 1 || got[0] != want {
			t.Errorf("stream %d: ratelimit %q, want %q", i, got, want)
		}
		if i == 3 {
			if got := md.Get(grpclimit.HeaderRetryAfter); len(got) != 1 || got[0] != "60" {
				t.Errorf("refused stream: retry-after %q", got)
			}
			if wait, ok := grpclimit.RetryDelay(err); !ok || wait <= 59*time.Second || wait > time.Minute {
				t.Errorf("refused stream: RetryInfo %v %v", wait, ok)
			}
		}
	}
	// The unary method of the same service is not limited.
	expect(t, conn, check, ok(4)...)
}

func TestKeyByMetadata(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{check: "2/1m"}, fresh(), core.WithKey(core.KeyByHeader("X-API-Key"))))
	as := func(key string) context.Context {
		if key == "" {
			return context.Background()
		}
		return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
	}
	for i, c := range []struct {
		key  string
		want codes.Code
	}{
		{"alice", codes.OK}, {"alice", codes.OK}, {"alice", codes.ResourceExhausted},
		{"bob", codes.OK},
		{"", codes.OK}, {"", codes.OK}, {"", codes.ResourceExhausted}, // no key: the peer's IP
		{"bob", codes.OK}, {"bob", codes.ResourceExhausted},
	} {
		if r := healthCheck(t, conn, as(c.key)); r.code != c.want {
			t.Fatalf("call %d (key %q): %v, want %v", i+1, c.key, r.err, c.want)
		}
	}
}

type userKey struct{}

func TestKeyByContextValue(t *testing.T) {
	ic := grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), core.WithKey(core.KeyByValue(userKey{})))
	// What an authentication interceptor before the limits would do.
	auth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if u := md.Get("user"); len(u) > 0 {
			ctx = context.WithValue(ctx, userKey{}, u[0])
		}
		return handler(ctx, req)
	}
	conn := serve(t, nil, grpc.ChainUnaryInterceptor(auth, ic.Unary()))
	user := func(u string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "user", u)
	}
	for i, c := range []struct {
		user string
		want codes.Code
	}{{"ann", codes.OK}, {"ann", codes.ResourceExhausted}, {"ben", codes.OK}, {"ben", codes.ResourceExhausted}} {
		if r := healthCheck(t, conn, user(c.user)); r.code != c.want {
			t.Fatalf("call %d (user %q): %v, want %v", i+1, c.user, r.err, c.want)
		}
	}
}

func TestTrustedProxies(t *testing.T) {
	forwarded := func(client string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", client)
	}
	// The test's client connects from 127.0.0.1: as a trusted proxy, it names the client.
	conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), core.WithTrustedProxies("127.0.0.1")))
	for i, c := range []struct {
		client string
		want   codes.Code
	}{
		{"203.0.113.1", codes.OK}, {"203.0.113.1", codes.ResourceExhausted},
		{"203.0.113.2", codes.OK},
		{"2001:db8:1:2::1", codes.OK}, {"2001:db8:1:2::ffff", codes.ResourceExhausted}, // one /64
		{"2001:db8:1:3::1", codes.OK},
	} {
		if r := healthCheck(t, conn, forwarded(c.client)); r.code != c.want {
			t.Fatalf("call %d (for %s): %v, want %v", i+1, c.client, r.err, c.want)
		}
	}
	// Untrusted, the same header is the client's own say: ignored.
	conn = limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, fresh()))
	for i, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		want := map[bool]codes.Code{true: codes.OK, false: codes.ResourceExhausted}[i == 0]
		if r := healthCheck(t, conn, forwarded(client)); r.code != want {
			t.Fatalf("forged call %d (for %s): %v, want %v", i+1, client, r.err, want)
		}
	}
}

func TestDryRun(t *testing.T) {
	var rec recorder
	conn := limited(t, grpclimit.Must(map[string]string{check: "2/1m"}, fresh(), core.WithDryRun(), rec.option()))
	rs := expect(t, conn, check, ok(4)...)
	if got := field(rs[3].header, grpclimit.HeaderRateLimit); len(got) != 1 || got[0] != `"2/1m";r=0;t=60` {
		t.Errorf("dry-run refusal: ratelimit %q", got)
	}
	if got := rs[3].header.Get(grpclimit.HeaderRetryAfter); len(got) != 0 {
		t.Errorf("dry-run refusal: retry-after %q, want none (the call went through)", got)
	}
	events := rec.all()
	if len(events) != 4 || events[2].Outcome != core.Refused || !events[2].DryRun || events[3].Outcome != core.Refused {
		t.Errorf("events %+v, want 2 admitted then 2 refusals in dry run", events)
	}
}

func TestSkip(t *testing.T) {
	skipProbes := core.WithSkip(func(r core.Request) bool { return r.Header("probe") == "yes" })
	conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), skipProbes))
	probe := metadata.AppendToOutgoingContext(context.Background(), "probe", "yes")
	for i := range 3 {
		if r := healthCheck(t, conn, probe); r.code != codes.OK || len(r.header.Get(grpclimit.HeaderRateLimit)) != 0 {
			t.Fatalf("skipped call %d: %v, metadata %v", i+1, r.err, r.header)
		}
	}
	expect(t, conn, check, codes.OK, codes.ResourceExhausted)
}

func TestRequestView(t *testing.T) {
	var seen []string
	key := core.WithKey(func(r core.Request) (string, error) {
		seen = []string{r.Method(), r.Path(), r.Route(), r.Header("X-Two"), strings.Join(r.Headers("x-two"), "|"), r.RemoteAddr(), fmt.Sprint(r.Value(userKey{}))}
		return "k", nil
	})
	conn := limited(t, grpclimit.Must(map[string]string{check: "5/1m"}, fresh(), key))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-two", "a", "x-two", "b")
	if r := healthCheck(t, conn, ctx); r.code != codes.OK {
		t.Fatal(r.err)
	}
	if len(seen) != 7 || seen[0] != check || seen[1] != check || seen[2] != check || seen[3] != "a" || seen[4] != "a|b" ||
		!strings.HasPrefix(seen[5], "127.0.0.1:") || seen[6] != "<nil>" {
		t.Errorf("the key function saw %q", seen)
	}
}

// failingStore fails every decision, like a Redis that is down.
type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errDown
}

func TestFailModes(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	hook := core.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
	down := core.WithStore(failingStore{})
	t.Run("open", func(t *testing.T) {
		conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, down, hook))
		rs := expect(t, conn, check, ok(3)...)
		if len(rs[2].header.Get(grpclimit.HeaderRateLimit)) != 0 {
			t.Errorf("no decision was made, yet the call got %v", rs[2].header)
		}
	})
	t.Run("closed", func(t *testing.T) {
		conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, down, hook, core.WithFailMode(core.FailClosed)))
		r := expect(t, conn, check, codes.Unavailable)[0]
		if got := r.header.Get(grpclimit.HeaderRetryAfter); len(got) != 1 || got[0] != "1" {
			t.Errorf("retry-after %q, want 1", got)
		}
		if wait, ok := grpclimit.RetryDelay(r.err); !ok || wait != time.Second {
			t.Errorf("RetryInfo %v %v, want a second", wait, ok)
		}
		if strings.Contains(r.err.Error(), errDown.Error()) {
			t.Errorf("the store's error reached the client: %v", r.err)
		}
	})
	t.Run("local", func(t *testing.T) {
		conn := limited(t, grpclimit.Must(map[string]string{check: "2/1m"}, down, hook, core.WithFailMode(core.FailLocal)))
		r := expect(t, conn, check, codes.OK, codes.OK, codes.ResourceExhausted)[2]
		if wait, ok := grpclimit.RetryDelay(r.err); !ok || wait <= 59*time.Second {
			t.Errorf("local refusal: RetryInfo %v %v, want the local decision's wait", wait, ok)
		}
	})
	t.Run("local-with-fail-status", func(t *testing.T) {
		// A local refusal is over the limit, whatever WithFailStatus says of undecided ones.
		conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, down, hook, core.WithFailMode(core.FailLocal), core.WithFailStatus(503)))
		r := expect(t, conn, check, codes.OK, codes.ResourceExhausted)[1]
		if msg := status.Convert(r.err).Message(); msg != "Too Many Requests" {
			t.Errorf("local refusal with WithFailStatus(503): %q, want %q", msg, "Too Many Requests")
		}
	})
	t.Run("closed-dry-run", func(t *testing.T) {
		conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, down, hook, core.WithFailMode(core.FailClosed), core.WithDryRun()))
		expect(t, conn, check, ok(2)...)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 || !errors.Is(errs[0], errDown) {
		t.Errorf("error hook got %v, want the store's errors", errs)
	}
}

func TestCostAboveTheLimit(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{check: "3/1m"}, fresh(), core.WithCost(func(core.Request) int { return 4 }), core.WithErrorHook(func(context.Context, error) {})))
	r := expect(t, conn, check, codes.ResourceExhausted)[0]
	if wait, ok := grpclimit.RetryDelay(r.err); ok {
		t.Errorf("a call that can never fit got RetryInfo %v", wait)
	}
	if got := r.header.Get(grpclimit.HeaderRetryAfter); len(got) != 0 {
		t.Errorf("a call that can never fit got retry-after %q", got)
	}
}

func TestDenyHandler(t *testing.T) {
	var got []string
	deny := grpclimit.WithDenyHandler(func(ctx context.Context, method string, d core.Decision, err error) error {
		got = append(got, fmt.Sprintf("%s %v %v %v", method, d.Rate, d.Allowed, err))
		return status.Error(codes.Unavailable, "slow down")
	})
	conn := limited(t, grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), deny))
	r := expect(t, conn, check, codes.OK, codes.Unavailable)[1]
	if msg := status.Convert(r.err).Message(); msg != "slow down" {
		t.Errorf("message %q", msg)
	}
	if len(got) != 1 || got[0] != check+" 1/1m false <nil>" {
		t.Errorf("deny handler saw %q", got)
	}
	if h := r.header.Get(grpclimit.HeaderRetryAfter); len(h) != 1 {
		t.Errorf("retry-after %q: the fields are set before the deny handler", h)
	}
}

func TestLegacyHeaders(t *testing.T) {
	conn := limited(t, grpclimit.Must(map[string]string{check: "2/1m"}, fresh(), core.WithHeaders(core.HeadersLegacy)))
	md := expect(t, conn, check, codes.OK)[0].header
	if got := md.Get(grpclimit.HeaderLimit); len(got) != 1 || got[0] != "2" {
		t.Errorf("x-ratelimit-limit %q", got)
	}
	if got := md.Get(grpclimit.HeaderRemaining); len(got) != 1 || got[0] != "1" {
		t.Errorf("x-ratelimit-remaining %q", got)
	}
	if got := md.Get(grpclimit.HeaderReset); len(got) != 1 {
		t.Errorf("x-ratelimit-reset %q", got)
	}
	if got := md.Get(grpclimit.HeaderRateLimit); len(got) != 0 {
		t.Errorf("legacy style sent ratelimit %q", got)
	}
}

func TestRetryDelayOfOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("plain"), status.Error(codes.ResourceExhausted, "no details")} {
		if wait, ok := grpclimit.RetryDelay(err); ok {
			t.Errorf("RetryDelay(%v) = %v, true", err, wait)
		}
	}
}

// TestInterceptorOutsideAServer calls the interceptor as a unit test of an application
// would: there is no response to carry metadata, and the call is still decided.
func TestInterceptorOutsideAServer(t *testing.T) {
	ic := grpclimit.Must(map[string]string{check: "1/1m"}, fresh())
	info := &grpc.UnaryServerInfo{FullMethod: check}
	handler := func(context.Context, any) (any, error) { return "done", nil }
	if out, err := ic.Unary()(context.Background(), nil, info, handler); err != nil || out != "done" {
		t.Fatalf("first call: %v %v", out, err)
	}
	if _, err := ic.Unary()(context.Background(), nil, info, handler); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call: %v", err)
	}
}

// TestChainedLimits installs two sets of limits on one server, as an application with a
// server-wide limit and a stricter one for a method would: the client sees a RateLimit
// member from each limit that decided the call, and a call the second refuses still
// counts in the first.
func TestChainedLimits(t *testing.T) {
	store := fresh()
	wide := grpclimit.Must(map[string]string{"*": "4/1m"}, store)
	strict := grpclimit.Must(map[string]string{check: "2/1m"}, store)
	conn := serve(t, nil, grpc.ChainUnaryInterceptor(wide.Unary(), strict.Unary()))
	rs := expect(t, conn, check, codes.OK, codes.OK, codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted)
	if got := field(rs[1].header, grpclimit.HeaderRateLimit); len(got) != 2 || got[0] != `"4/1m";r=2;t=60` || got[1] != `"2/1m";r=0;t=60` {
		t.Errorf("call 2: ratelimit %q, want a member from each limit", got)
	}
	if got := field(rs[3].header, grpclimit.HeaderRateLimit); len(got) != 2 || got[0] != `"4/1m";r=0;t=60` {
		t.Errorf("call 4: ratelimit %q, want the wide limit's quota used up by the refused calls", got)
	}
	if got := field(rs[4].header, grpclimit.HeaderRateLimit); len(got) != 1 || got[0] != `"4/1m";r=0;t=60` {
		t.Errorf("call 5: ratelimit %q, want the wide limit's refusal alone", got)
	}
}

func TestIPv6PeerGroupedBy64(t *testing.T) {
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var rec recorder
	ic := grpclimit.Must(map[string]string{check: "1/1m"}, fresh(), rec.option())
	s := grpc.NewServer(grpc.UnaryInterceptor(ic.Unary()))
	healthpb.RegisterHealthServer(s, &healthService{})
	go s.Serve(lis)
	defer s.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	expect(t, conn, check, codes.OK, codes.ResourceExhausted)
	if events := rec.all(); len(events) == 0 || events[0].Key != "::/64" {
		t.Errorf("events %+v, want the key ::/64", events)
	}
}
