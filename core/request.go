package core

import "context"

// A Request is the view of an HTTP request that key, skip and cost functions read.
type Request interface {
	Context() context.Context
	Method() string
	// Path is the request path, as sent; Route the matched route pattern ("/user/:id",
	// "GET /user/{id}"), or "".
	Path() string
	Route() string
	// Header is the first value of the named request header, or ""; Headers are all of
	// its values, for fields a proxy chain may split over several lines.
	Header(name string) string
	Headers(name string) []string
	// RemoteAddr is the connection's peer address, usually "host:port".
	RemoteAddr() string
	// Value is a value the application stored on the request: Gin's and Echo's c.Set,
	// Fiber's c.Locals, or for net/http the context value under key.
	Value(key any) any
}
