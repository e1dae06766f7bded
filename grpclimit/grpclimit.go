// Package grpclimit limits gRPC calls per method with reqlimit's strict sliding window: use
// New (or Must) with the limits by method name, and install its Unary and Stream
// interceptors on the server:
//
//	limits := grpclimit.Must(map[string]string{
//		"/helloworld.Greeter/SayHello": "3/1m",   // one method
//		"helloworld.Greeter":           "100/1m", // every other method of the service
//	})
//	s := grpc.NewServer(grpc.UnaryInterceptor(limits.Unary()), grpc.StreamInterceptor(limits.Stream()))
//	pb.RegisterGreeterServer(s, &greeter{})
//	if err := limits.Verify(s.GetServiceInfo()); err != nil { // a misspelled name
//		log.Fatal(err)
//	}
//
// "N/T" means that in any interval of length T at most N calls of a method get through per
// client, which is the peer's IP address (IPv6 grouped by /64; x-forwarded-for counts only
// with core.WithTrustedProxies). The most specific entry decides a call: its full method
// name, then its service, then "*", which matches every method. A method no entry matches
// is not limited; Verify finds entries that match no registered method. Each method has
// buckets of its own, also under a service or "*" entry; core.WithScope makes the methods
// share one. Calls that grpc.UnknownServiceHandler serves share one bucket per client
// under "*" (per service under a service entry), since their names are the client's; so do
// the bidirectional stream methods of a service registered with a nil implementation,
// which grpc passes to interceptors alike: give such a service any non-nil implementation
// to key its methods apart.
//
// A refused call fails at once with codes.ResourceExhausted and a google.rpc.RetryInfo
// detail holding the exact wait (RetryDelay reads it back). Every limited call, admitted
// or not, gets the IETF RateLimit fields as response header metadata: "ratelimit",
// "ratelimit-policy", and on a refusal "retry-after" in whole seconds; as trailer metadata
// when an interceptor that ran before the limit has sent the header. A stream counts once,
// when it is opened; its messages are not counted.
//
// The options are package core's, as for the HTTP adapters, with gRPC in place of HTTP:
// a key function's core.Request reads metadata through Header, and its Method, Path and
// Route are the full method name. Options that name HTTP statuses (core.WithDenyResponse,
// core.WithFailStatus) set no gRPC code; WithDenyHandler does.
//
// core.WithCountWhen counts a call only if its outcome satisfies the rule, which takes the
// HTTP status grpc-gateway maps the call's gRPC code to (OK 200, Unauthenticated 401,
// PermissionDenied 403; New lists them all): with core.WithCountWhen(core.Failed), a login
// method counts only the calls that fail. A call takes its slot when it is admitted and
// gives it back when its handler returns a code the rule does not count. A handler that
// panics keeps its slot.
//
// A stream holds its slot while it is open. One that has sent the client no message is
// settled by the code its handler ends it with, as a unary call. One that has sent a
// message was served, whatever its ending, since a handler returns the error of its last
// Send when the client leaves (Canceled): under core.Succeeded it counts, whatever the
// code, so a client cannot read a stream's updates and cancel to be served without limit.
// Under core.Failed, a stream the client leaves after being served (Canceled or
// DeadlineExceeded) is no failed attempt and does not count, so closing a watch does not
// use up its user's quota; any other error counts, after messages too, so a login that
// sends a challenge and then refuses counts its refusals; and a stream that ends in error
// before sending anything counts, even when the client cancelled it, as a unary call
// abandoned before its answer does: the limit cannot tell a client that gave up from one
// that probed. Under another rule, a stream that sent a message counts where the rule
// counts OK (200), and otherwise as under core.Failed.
package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
)

// AllMethods is the entry that matches every method no more specific entry names.
const AllMethods = "*"

// Response header metadata keys: gRPC metadata keys are lowercase.
const (
	HeaderRateLimit       = "ratelimit"             // the tightest rate's quota left: "3/1m";r=2;t=60
	HeaderRateLimitPolicy = "ratelimit-policy"      // every rate of the policy: "3/1m";q=3;w=60
	HeaderRetryAfter      = "retry-after"           // on a refusal: seconds to wait, rounded up
	HeaderLimit           = "x-ratelimit-limit"     // with core.HeadersLegacy or HeadersBoth: see Interceptors
	HeaderRemaining       = "x-ratelimit-remaining" // likewise
	HeaderReset           = "x-ratelimit-reset"     // likewise, in unix seconds
)

// Interceptors enforce the limits given to New on a gRPC server. They are safe for
// concurrent use; install Unary and Stream on the same server, since the limits apply to
// whichever kind of call a method is.
//
// Interceptors chained on one server each decide and each add their members to the
// RateLimit fields. The legacy x-ratelimit-* fields hold one value per limit over HTTP,
// the tightest's; gRPC header metadata can only be added to, so there each chained limit
// that has fewer calls left than those before it adds its own values after theirs: read
// the last value, or use the standard fields.
type Interceptors struct {
	methods  map[string]*entry // by full method name, "/pkg.Service/Method"
	services map[string]*entry // by service name, "pkg.Service"
	all      *entry            // "*", or nil
	deny     DenyFunc
}

// An entry is one declared limit.
type entry struct {
	l adapter.Limiter
}

// New returns interceptors enforcing limits, a map from a full method name
// ("/pkg.Service/Method"), a service name ("pkg.Service" or "/pkg.Service/") or "*" to a
// policy in text form ("3/1m", "500/2s,2000/10s"). opts apply to every entry. A bad name,
// policy or option is an error naming the entry.
//
// Under core.WithCountWhen, the rule sees the HTTP status of the code the handler returned
// (nil is OK; an error that is not a gRPC status is Unknown, or Canceled or DeadlineExceeded
// for a context error, as the server sends it), mapped as grpc-gateway's
// runtime.HTTPStatusFromCode does:
//
//	OK 200                 Canceled 499            Unknown 500
//	InvalidArgument 400    DeadlineExceeded 504    NotFound 404
//	AlreadyExists 409      PermissionDenied 403    Unauthenticated 401
//	ResourceExhausted 429  FailedPrecondition 400  Aborted 409
//	OutOfRange 400         Unimplemented 501       Internal 500
//	Unavailable 503        DataLoss 500            any other code 500
//
// The code is the one the handler and the interceptors after these returned; interceptors
// before them (a recovery interceptor turning a panic into Internal) are not seen. A
// handler that panics is not settled: its call counts. A stream that sent the client a
// message is served: the rule sees OK when the client ended it (Canceled,
// DeadlineExceeded), and is asked of OK before its code otherwise.
func New(limits map[string]string, opts ...core.Option) (*Interceptors, error) {
	if len(limits) == 0 {
		return nil, errors.New("grpclimit: no limits: want a map from method, service or \"*\" to a policy")
	}
	ic := &Interceptors{methods: map[string]*entry{}, services: map[string]*entry{}}
	declared := map[string]string{} // normalized name: the name as given, for duplicates
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names) // the same error for the same map, whatever its order
	// The entries are one registration: a Quota they are given holds them together.
	opts = append(slices.Clip(opts), adapter.Option(hook.BatchKey{}, new(byte)))
	for _, name := range names {
		kind, norm, err := parseName(name)
		if err != nil {
			return nil, err
		}
		if prev, ok := declared[norm]; ok {
			return nil, fmt.Errorf("grpclimit: %q and %q both name %s", prev, name, norm)
		}
		declared[norm] = name
		l, err := adapter.Parse(limits[name], opts...)
		if err != nil {
			return nil, fmt.Errorf("grpclimit: %q: %w", name, err)
		}
		if l.FrameworkIP() {
			return nil, fmt.Errorf("grpclimit: %q: core.WithClientIPFromFramework: gRPC has no framework client IP; use core.WithTrustedProxies", name)
		}
		e := &entry{l: l}
		switch kind {
		case kindMethod:
			ic.methods[norm] = e
		case kindService:
			ic.services[norm] = e
		default:
			ic.all = e
		}
		if ic.deny == nil {
			ic.deny, _ = l.Extension(denyKey{}).(DenyFunc)
		}
	}
	return ic, nil
}

// Verify returns an error naming each entry that matches nothing in services, which
// grpc.Server's GetServiceInfo returns once every service is registered: a misspelled
// method or service name is never matched, so its calls would have no limit. Call it
// before Serve; the interceptors cannot know the server's methods themselves.
func (ic *Interceptors) Verify(services map[string]grpc.ServiceInfo) error {
	registered := strings.Join(slices.Sorted(maps.Keys(services)), ", ")
	var errs []error
	for name := range ic.services {
		if _, ok := services[name]; !ok {
			errs = append(errs, fmt.Errorf("grpclimit: %q: the server has no service %s (it has %s)", name, name, registered))
		}
	}
	for full := range ic.methods {
		svc, method, _ := strings.Cut(full[1:], "/")
		info, ok := services[svc]
		if !ok {
			errs = append(errs, fmt.Errorf("grpclimit: %q: the server has no service %s (it has %s)", full, svc, registered))
			continue
		}
		var names []string
		for _, m := range info.Methods {
			names = append(names, m.Name)
		}
		if !slices.Contains(names, method) {
			slices.Sort(names)
			errs = append(errs, fmt.Errorf("grpclimit: %q: service %s has no method %s (it has %s)", full, svc, method, strings.Join(names, ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Must is New for limits written in the program: an error panics, like regexp.MustCompile.
func Must(limits map[string]string, opts ...core.Option) *Interceptors {
	ic, err := New(limits, opts...)
	if err != nil {
		panic(err.Error())
	}
	return ic
}

type nameKind uint8

const (
	kindMethod nameKind = iota
	kindService
	kindAll
)

// parseName reads an entry's name as a full method ("/pkg.Service/Method", or without
// the leading slash), a service ("pkg.Service", "/pkg.Service" or "/pkg.Service/") or "*",
// and returns it as the interceptors match it: "/pkg.Service/Method" or "pkg.Service".
func parseName(name string) (nameKind, string, error) {
	if name == AllMethods {
		return kindAll, name, nil
	}
	bad := func(why string) (nameKind, string, error) {
		return 0, "", fmt.Errorf("grpclimit: bad method %q: %s; want \"/package.Service/Method\", \"package.Service\" or \"*\"", name, why)
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return bad("it has a space or a control character")
	}
	s := strings.TrimPrefix(name, "/")
	if svc, ok := strings.CutSuffix(s, "/"); ok {
		s = svc // "/pkg.Service/": the service
	}
	svc, method, isMethod := strings.Cut(s, "/")
	switch {
	case svc == "":
		return bad("no service name")
	case strings.ContainsAny(svc, "*"):
		return bad("a wildcard is only \"*\" alone")
	case !isMethod:
		return kindService, svc, nil
	case method == "":
		return bad("no method name")
	case strings.ContainsAny(method, "/*"):
		return bad("too many slashes, or a wildcard")
	}
	return kindMethod, "/" + svc + "/" + method, nil
}

// lookup returns the entry deciding calls of fullMethod, or nil.
func (ic *Interceptors) lookup(fullMethod string) *entry {
	if e := ic.methods[fullMethod]; e != nil {
		return e
	}
	if len(ic.services) > 0 {
		if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
			if e := ic.services[fullMethod[1:i]]; e != nil {
				return e
			}
		}
	}
	return ic.all
}

// Policy returns the policy the interceptors apply to fullMethod ("/pkg.Service/Method"),
// or nil when no entry matches it.
func (ic *Interceptors) Policy(fullMethod string) *core.Policy {
	if e := ic.lookup(fullMethod); e != nil {
		return e.l.Policy()
	}
	return nil
}

// Unary returns the interceptor for unary calls.
func (ic *Interceptors) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		e := ic.lookup(info.FullMethod)
		if e == nil {
			return handler(ctx, req)
		}
		v, md, err := ic.check(ctx, e, info.FullMethod, info.FullMethod)
		if md != nil {
			// Once an interceptor before the limit has sent the header, the fields go in
			// the trailer. Both fail only outside a server's call (an interceptor called
			// directly), where there is no response to carry them.
			if grpc.SetHeader(ctx, md) != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
			ctx = withSent(ctx, md)
		}
		if err != nil {
			return nil, err
		}
		if v.Release == nil {
			return handler(ctx, req)
		}
		// core.WithCountWhen: the code the handler returns decides whether the call
		// counts. A handler that panics never gets here, and its call counts.
		reply, err := handler(ctx, req)
		e.l.Settle(ctx, v, httpStatus(err))
		return reply, err
	}
}

// Stream returns the interceptor for streaming calls: a stream is counted once, when it
// is opened, and a refused stream fails before the handler runs. Under core.WithCountWhen
// it holds its slot until its handler returns; whether it sent the client a message and
// the code its handler ended it with decide whether it counts (see the package doc).
func (ic *Interceptors) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		e := ic.lookup(info.FullMethod)
		if e == nil {
			return handler(srv, ss)
		}
		route := info.FullMethod
		if srv == nil && info.IsClientStream && info.IsServerStream {
			// grpc.UnknownServiceHandler's calls, which grpc passes as bidirectional
			// streams of no service. So are those of a bidirectional method of a service
			// registered without an implementation: they share a bucket too, the stricter
			// answer, since the two cannot be told apart here.
			route = ic.unknownRoute(route)
		}
		v, md, err := ic.check(ss.Context(), e, info.FullMethod, route)
		if md != nil {
			if ss.SetHeader(md) != nil {
				ss.SetTrailer(md) // the header has gone: see Unary
			}
			if ctx := withSent(ss.Context(), md); ctx != ss.Context() {
				ss = sentStream{ss, ctx}
			}
		}
		if err != nil {
			return err
		}
		if v.Release == nil {
			return handler(srv, ss)
		}
		// core.WithCountWhen: the stream holds its slot while it is open; whether it sent
		// the client a message and the code its handler ends it with decide whether it
		// counts (see settleStream). A handler that panics is not settled, and counts.
		cs := &countingStream{ServerStream: ss}
		err = handler(srv, cs)
		settleStream(ss.Context(), e.l, v, err, cs.sent.Load())
		return err
	}
}

// unknownRoute returns the route that keys a call grpc.UnknownServiceHandler serves
// (grpc passes no service then): its name is whatever the client wrote, and keyed by it, a
// client would get a bucket per made-up name. Only the part an entry names counts: the
// method of a method entry, the service of a service entry, and nothing under "*", where
// such calls share one bucket per client, as requests matching no route do.
func (ic *Interceptors) unknownRoute(fullMethod string) string {
	if ic.methods[fullMethod] != nil {
		return fullMethod
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 && ic.services[fullMethod[1:i]] != nil {
		return fullMethod[:i+1]
	}
	return ""
}

// check decides one call of method, keyed by route: its verdict, the header metadata to
// send (nil for none) and, when the call is refused, its error.
func (ic *Interceptors) check(ctx context.Context, e *entry, method, route string) (adapter.Verdict, metadata.MD, error) {
	var addr string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	// Always given: a call allocates much more than this, and core reads its metadata for
	// the warning of an untrusted proxy even where no option of the limit does.
	req := &request{ctx: ctx, method: method, route: route, peer: addr}
	h := &headerSetter{md: metadata.MD{}}
	h.sent, _ = ctx.Value(sentKey{}).(metadata.MD)
	v := e.l.Check(ctx, adapter.Input{Route: route, Peer: addr, Request: req}, h)
	md := h.md
	if len(md) == 0 {
		md = nil
	}
	if v.Allowed {
		return v, md, nil
	}
	if ic.deny != nil {
		// A nil error would run the handler of a call the limit refused: one that only
		// logs and hands back the err it was given (nil over the limit) gets the default.
		if err := ic.deny(ctx, method, v.Decision, v.Err); err != nil {
			return v, md, err
		}
	}
	return v, md, refusal(e.l, v)
}

// refusal is the error of a refused call: over the limit, ResourceExhausted with the
// exact wait; a cost above the limit, ResourceExhausted with none, since waiting cannot
// help (as grpc-go itself refuses a message above the size limit); a store failure under
// core.FailClosed, Unavailable, since the service cannot decide rather than the client
// being over its quota.
func refusal(l adapter.Limiter, v adapter.Verdict) error {
	msg := strings.TrimSpace(l.DenyBody(v.Status, v.Err))
	switch {
	case errors.Is(v.Err, core.ErrCostTooHigh):
		return status.Error(codes.ResourceExhausted, msg)
	case v.Err == nil || v.Decision.FullReset > 0:
		// Over the limit: by the store's decision, or after a store failure by
		// core.FailLocal's local one. A refusal always leaves the key holding grants.
		return withRetry(codes.ResourceExhausted, msg, v.Decision.RetryAfter)
	}
	// core.FailClosed decided nothing: its one-second wait (the HTTP adapters' Retry-After:
	// 1) is a pause before trying again, not a wait the store worked out.
	return withRetry(codes.Unavailable, "rate limit unavailable", v.Decision.RetryAfter)
}

func withRetry(code codes.Code, msg string, wait time.Duration) error {
	st := status.New(code, msg)
	if wait <= 0 {
		return st.Err()
	}
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// RetryDelay returns the wait a refused call's error carries in its google.rpc.RetryInfo
// detail, for clients: the call can succeed after that long if the client sends nothing
// meanwhile. ok is false when err has no such detail.
func RetryDelay(err error) (wait time.Duration, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, isRetry := d.(*errdetails.RetryInfo); isRetry && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// A DenyFunc returns the error a refused call fails with, in place of the default
// ResourceExhausted. method is the full method name and d the decision; err is nil for a
// call over the limit, wraps core.ErrCostTooHigh for a cost above it, and otherwise is the
// store's failure, when the fail mode refused the call: core.FailLocal by a local decision
// in d, or core.FailClosed without one. The rate-limit header metadata is set already.
// A refused call fails whatever deny returns: a nil error gets the default one.
type DenyFunc func(ctx context.Context, method string, d core.Decision, err error) error

type denyKey struct{}

// WithDenyHandler makes deny build the error of refused calls, to choose another code,
// message or details.
func WithDenyHandler(deny DenyFunc) core.Option { return adapter.Option(denyKey{}, deny) }

// headerSetter gathers the rate-limit fields as gRPC response metadata, whose keys are
// lowercase. A server cannot read back the header metadata set so far, so the fields that
// limits earlier in the chain sent come through the context (sent): a limit of the same
// policy then names its members apart, as on HTTP, and a limit with more left than an
// earlier one leaves the legacy fields to it.
type headerSetter struct {
	md   metadata.MD
	sent metadata.MD // the fields earlier limits on the call sent
}

func (h *headerSetter) Set(name, value string) {
	h.md[metadataKey(name)] = []string{strings.Clone(value)} // core's values may be transient
}

// Add keeps the values already set: a RateLimit field is a list with a member for every
// limit that applies, and a metadata key with several values is such a list.
func (h *headerSetter) Add(name, value string) {
	k := metadataKey(name)
	h.md[k] = append(h.md[k], strings.Clone(value))
}

// Values is what the field holds so far on this call, earlier limits' values first.
func (h *headerSetter) Values(name string) []string {
	k := metadataKey(name)
	if prev := h.sent[k]; len(prev) > 0 {
		return append(slices.Clip(prev), h.md[k]...)
	}
	return h.md[k]
}

type sentKey struct{}

// withSent is ctx carrying the fields of md on, after those sent before, to the limits
// later in the chain.
func withSent(ctx context.Context, md metadata.MD) context.Context {
	sent, _ := ctx.Value(sentKey{}).(metadata.MD)
	return context.WithValue(ctx, sentKey{}, metadata.Join(sent, md))
}

// sentStream is a stream whose context carries the members sent (see withSent).
type sentStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s sentStream) Context() context.Context { return s.ctx }

func metadataKey(name string) string {
	switch name {
	case hook.HeaderRateLimit:
		return HeaderRateLimit
	case hook.HeaderRateLimitPolicy:
		return HeaderRateLimitPolicy
	case hook.HeaderRetryAfter:
		return HeaderRetryAfter
	case hook.HeaderLimit:
		return HeaderLimit
	case hook.HeaderRemaining:
		return HeaderRemaining
	case hook.HeaderReset:
		return HeaderReset
	}
	return strings.ToLower(name)
}

// request is core.Request over a gRPC call: headers are the incoming metadata, and the
// method, path and route are the full method name.
type request struct {
	ctx    context.Context
	method string
	route  string
	peer   string
	md     metadata.MD
	read   bool
}

func (q *request) Context() context.Context { return q.ctx }
func (q *request) Method() string           { return q.method }
func (q *request) Path() string             { return q.method }
func (q *request) Route() string            { return q.route }
func (q *request) RemoteAddr() string       { return q.peer }
func (q *request) Value(key any) any        { return q.ctx.Value(key) }

func (q *request) Header(name string) string {
	if v := q.Headers(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Headers reads the metadata once per call: FromIncomingContext copies it.
func (q *request) Headers(name string) []string {
	if !q.read {
		q.md, _ = metadata.FromIncomingContext(q.ctx)
		q.read = true
	}
	return q.md.Get(name)
}
