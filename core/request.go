package core

import "context"

// A Request is the framework-neutral view of an HTTP request that key functions, skip rules
// and cost functions read. Each adapter implements it over its framework's context.
type Request interface {
	// Context returns the request's context.
	Context() context.Context
	// Method returns the HTTP method.
	Method() string
	// Path returns the request path, as sent.
	Path() string
	// Route returns the matched route pattern ("/user/:id", "GET /user/{id}"), or "".
	Route() string
	// Header returns the first value of the named request header, or "".
	Header(name string) string
	// Headers returns every value of the named request header, for fields a proxy chain
	// may split over several lines (X-Forwarded-For).
	Headers(name string) []string
	// RemoteAddr returns the connection's peer address as the server saw it: usually
	// "host:port", but it may be empty, lack a port or name a unix socket.
	RemoteAddr() string
	// Value returns a value the application stored on the request: Gin's and Echo's
	// c.Get, Fiber's c.Locals, or for net/http the context value under key.
	Value(key any) any
}
