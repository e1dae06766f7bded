package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"

	"github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"
	"github.com/valyala/fasthttp"
)

// Middleware peers are driven in-process: the request goes through the framework's own
// handler chain (routing, context, middleware) with no socket, so the numbers are the
// framework's and the limiter's, not the kernel's. Every request comes from "key:1234",
// and the limiters key by client IP, so the key reaches them as the client address.

// okBody is the route's whole work: the bare route and the limited one do the same.
var okBody = []byte("ok")

// discard is a ResponseWriter that keeps the status and nothing else.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	return len(b), nil
}
func (d *discard) WriteHeader(code int) {
	if d.status == 0 {
		d.status = code
	}
}

var rootURL = &url.URL{Path: "/"}

// serveHTTP returns an allowFunc sending GET / to h, as a net/http server would call it.
func serveHTTP(h http.Handler) allowFunc {
	return func(key string) (bool, error) {
		r := &http.Request{
			Method: http.MethodGet, URL: rootURL, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Host: "example.test", RemoteAddr: key + ":1234", RequestURI: "/",
		}
		r = r.WithContext(context.Background())
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, r)
		return status(w.status)
	}
}

// status maps a response status to an admission: 2xx admitted, 429 refused, else an error.
func status(code int) (bool, error) {
	switch {
	case code >= 200 && code < 300:
		return true, nil
	case code == http.StatusTooManyRequests:
		return false, nil
	}
	return false, fmt.Errorf("status %d", code)
}

// netHTTPRoute registers GET / on a ServeMux (so r.Pattern is set, as in production),
// wrapped in mw when it is not nil.
func netHTTPRoute(mw func(http.Handler) http.Handler) allowFunc {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(okBody) })
	if mw != nil {
		h = mw(h)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", h)
	return serveHTTP(mux)
}

// echoRoute is GET / on a new Echo v4, with mw as its global middleware when not nil.
func echoRoute(mw echo.MiddlewareFunc) allowFunc {
	e := echo.New()
	if mw != nil {
		e.Use(mw)
	}
	e.GET("/", func(c echo.Context) error { return c.Blob(http.StatusOK, "text/plain", okBody) })
	return serveHTTP(e)
}

// echo5Route is echoRoute on Echo v5.
func echo5Route(mw echo5.MiddlewareFunc) allowFunc {
	e := echo5.New()
	if mw != nil {
		e.Use(mw)
	}
	e.GET("/", func(c *echo5.Context) error { return c.Blob(http.StatusOK, "text/plain", okBody) })
	return serveHTTP(e)
}

// fiberRoute is GET / on a new Fiber v2 app, with mw when not nil, called through the
// fasthttp handler the app would give its server.
func fiberRoute(mw fiber.Handler) allowFunc {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if mw != nil {
		app.Use(mw)
	}
	app.Get("/", func(c *fiber.Ctx) error { return c.Send(okBody) })
	return serveFasthttp(app.Handler())
}

// fiber3Route is fiberRoute on Fiber v3.
func fiber3Route(mw fiber3.Handler) allowFunc {
	app := fiber3.New()
	if mw != nil {
		app.Use(mw)
	}
	app.Get("/", func(c fiber3.Ctx) error { return c.Send(okBody) })
	return serveFasthttp(app.Handler())
}

// serveFasthttp returns an allowFunc sending GET / to h, from the key's IP.
func serveFasthttp(h fasthttp.RequestHandler) allowFunc {
	// A server reuses one RequestCtx per connection; a pool does the same here, so the
	// bare route is not charged for zeroing a fresh one every call.
	pool := sync.Pool{New: func() any {
		f := new(fiberCall)
		f.req.Header.SetMethod(fasthttp.MethodGet)
		f.req.SetRequestURI("/")
		f.req.Header.SetHost("example.test")
		return f
	}}
	return func(key string) (bool, error) {
		ip := net.ParseIP(key)
		if ip == nil {
			return false, fmt.Errorf("fiber: key %q is not an IP", key)
		}
		f := pool.Get().(*fiberCall)
		defer pool.Put(f)
		f.ctx.Response.Reset()
		f.ctx.Init(&f.req, &net.TCPAddr{IP: ip, Port: 1234}, nil)
		h(&f.ctx)
		return status(f.ctx.Response.StatusCode())
	}
}

type fiberCall struct {
	req fasthttp.Request
	ctx fasthttp.RequestCtx
}
