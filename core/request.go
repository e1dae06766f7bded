package core

import "context"

// A Request is what key, skip and cost functions see of an HTTP request.
type Request interface {
	Context() context.Context // the request's context (Fiber v2's c.UserContext())
	Method() string           // "GET", "POST"...; grpclimit's is the full method name
	// Path is the path as sent; Route the matched pattern ("GET /user/{id}"), or "".
	Path() string
	Route() string
	// Header is the named header's first value, or ""; Headers all its lines' values.
	Header(name string) string
	Headers(name string) []string
	RemoteAddr() string // the connection's peer, usually "host:port"
	// Value is what the application stored under key: Gin's and Echo's c.Set, Fiber's
	// c.Locals, a context value for net/http.
	Value(key any) any
}
