// Package adaptertest is the conformance suite every reqlimit adapter runs: one table of
// scenarios, driven in-process through a small Adapter interface, so that the adapters
// cannot drift apart in what they key, send or refuse.
package adaptertest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/reqlimit/reqlimit/core"
)

// An Adapter builds an application around one adapter and sends it requests.
type Adapter interface {
	// Traits describes what the adapter's framework can do.
	Traits() Traits
	// Serve builds app (a fresh one: routes, limits, middleware) and returns a function
	// sending it one GET request in-process.
	Serve(app App) func(Request) Response
	// Limit calls the adapter's Limit and discards the middleware; it panics as Limit does.
	Limit(count int, period time.Duration, opts ...core.Option)
	// New calls the adapter's New and returns its error.
	New(policy string, opts ...core.Option) error
	// WithDenyHandler returns the adapter's DenyWith option with a deny function in the
	// framework's idiom that sets X-Wait to the decision's RetryAfter in whole seconds and
	// writes status and body; given status 0, it writes nothing and returns no error.
	WithDenyHandler(status int, body string) core.Option
}

// Traits describes an adapter.
type Traits struct {
	// Name is the package name, as Limit's panics name it ("ginlimit").
	Name string
	// Pattern maps a route path in Gin/Echo/Fiber syntax ("/user/:id") to the route the
	// adapter reports to core ("GET /user/{id}" for net/http's ServeMux).
	Pattern func(path string) string
	// FrameworkTrust reports whether Serve honours App.TrustProxies through the
	// framework's own trusted-proxy mechanism.
	FrameworkTrust bool
	// TrustHeader is the header the framework's trusted proxies set in the
	// trusted-proxies-in-the-framework scenario: X-Forwarded-For unless the adapter can only
	// use a header holding one address (Fiber: its c.IP() takes X-Forwarded-For's leftmost
	// entry, which the client writes).
	TrustHeader string
	// UseSharesBucket reports that a limit mounted app-wide cannot tell routes apart and
	// counts them all in one bucket (Fiber's app.Use, which reports the Use prefix).
	UseSharesBucket bool
	// ValueKey is the key App.ValueFromHeader stores under, for core.KeyByValue.
	ValueKey any
	// PreRouting reports that the framework can mount middleware before routing (App.Pre).
	PreRouting bool
}

// A Limit is one limit to mount: Limit(Count, Period, Opts...), or New(Policy, Opts...)
// when Policy is set.
type Limit struct {
	Count  int
	Period time.Duration
	Policy string
	Opts   []core.Option
}

// A Route is a GET route answering 200 "ok", behind its limits in order.
type Route struct {
	// Path is in Gin/Echo/Fiber syntax ("/user/:id").
	Path   string
	Limits []Limit
	// Answers makes the route answer as each request asks, through Answer: with the
	// status in its StatusHeader field, or with a panic when it has PanicHeader.
	Answers bool
}

// The request fields an answering route obeys (Route.Answers).
const (
	// StatusHeader holds the status the route answers ("401"), 200 without it. Where the
	// framework has an error type (Echo, Fiber), statuses from 400 up are returned as
	// that error (echo.NewHTTPError, fiber.NewError) rather than written, so that the
	// status is known only once the framework's error handler has run.
	StatusHeader = "X-Status"
	// PanicHeader, with any value, makes the route panic with ErrPanic.
	PanicHeader = "X-Panic"
)

// ErrPanic is what an answering route panics with. Each harness recovers it outermost,
// answering 500, as a framework's recovery middleware would; any other panic goes on.
var ErrPanic = errors.New("adaptertest: the handler panicked, as the request asked")

// Answer is what an answering route does with a request whose header fields get returns:
// it panics with ErrPanic when PanicHeader is set, else returns the status to answer.
func Answer(get func(name string) string) int {
	if get(PanicHeader) != "" {
		panic(ErrPanic)
	}
	if s, err := strconv.Atoi(get(StatusHeader)); err == nil {
		return s
	}
	return http.StatusOK
}

// Recover is the outermost middleware of a harness serving through net/http: it answers
// 500 to a request whose handler panicked with ErrPanic, and lets any other panic through.
func Recover(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p != ErrPanic {
					panic(p)
				}
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// An App is what Serve builds.
type App struct {
	Routes []Route
	// Use are limits mounted app-wide after routing, where the framework has one (r.Use,
	// e.Use, app.Use, or around the ServeMux with nethttp.WithMux).
	Use []Limit
	// Pre are limits mounted app-wide before routing, where the route is not yet known
	// (e.Pre, around the ServeMux without WithMux, Fiber's app.Use); see Traits.PreRouting.
	Pre []Limit
	// TrustProxies configures the framework's own trusted proxies (CIDRs), reading
	// X-Forwarded-For, and makes the limits take the framework's client IP.
	TrustProxies []string
	// ValueFromHeader, when set, puts a middleware before the limits that stores this
	// request header's value under Traits.ValueKey in the framework's idiom (c.Set,
	// c.Locals, a context value).
	ValueFromHeader string
}

// A Request is one GET request.
type Request struct {
	Path string
	// Remote is the peer address; "" means DefaultRemote, NoRemote an empty one.
	Remote string
	// Header lists name, value pairs; a name may repeat.
	Header []string
}

// DefaultRemote is the peer of requests that name none.
const DefaultRemote = "192.0.2.7:1234"

// NoRemote asks for a request whose peer address is empty.
const NoRemote = "\x00none"

// RemoteAddr returns the peer address to send.
func (r Request) RemoteAddr() string {
	switch r.Remote {
	case "":
		return DefaultRemote
	case NoRemote:
		return ""
	}
	return r.Remote
}

// A Response is what the application answered.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// WithOpts returns l with opts prepended, so l's own options win.
func (l Limit) WithOpts(opts ...core.Option) Limit {
	l.Opts = append(append([]core.Option(nil), opts...), l.Opts...)
	return l
}

// Constructors implements Adapter's Limit and New over an adapter's own Limit and New,
// and mounts Limits with them; adapters' test types embed it.
type Constructors[M any] struct {
	LimitFunc func(int, time.Duration, ...core.Option) M
	NewFunc   func(string, ...core.Option) (M, error)
}

// Limit calls LimitFunc and discards the middleware.
func (c Constructors[M]) Limit(count int, period time.Duration, opts ...core.Option) {
	c.LimitFunc(count, period, opts...)
}

// New calls NewFunc and returns its error.
func (c Constructors[M]) New(policy string, opts ...core.Option) error {
	_, err := c.NewFunc(policy, opts...)
	return err
}

// Mount builds l's middleware with LimitFunc, or NewFunc when l.Policy is set; a bad
// policy panics, as Limit's bad arguments do.
func (c Constructors[M]) Mount(l Limit) M {
	if l.Policy == "" {
		return c.LimitFunc(l.Count, l.Period, l.Opts...)
	}
	m, err := c.NewFunc(l.Policy, l.Opts...)
	if err != nil {
		panic(err)
	}
	return m
}

// MountAll mounts each of ls, with opts prepended to its options.
func (c Constructors[M]) MountAll(ls []Limit, opts ...core.Option) []M {
	ms := make([]M, len(ls))
	for i, l := range ls {
		ms[i] = c.Mount(l.WithOpts(opts...))
	}
	return ms
}

// Seconds formats d as whole seconds rounded up, as Retry-After does, for deny functions.
func Seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// ServeHTTP returns a Serve result for a net/http handler (net/http, Gin, Echo), driving it
// through httptest.
func ServeHTTP(h http.Handler) func(Request) Response {
	return func(req Request) Response {
		r := httptest.NewRequest("GET", req.Path, nil)
		r.RemoteAddr = req.RemoteAddr()
		for i := 0; i+1 < len(req.Header); i += 2 {
			r.Header.Add(req.Header[i], req.Header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return Response{Status: w.Code, Header: w.Header(), Body: w.Body.String()}
	}
}
