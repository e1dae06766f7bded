package adapter

import (
	"context"
	"net/http"
)

// HTTPRequest is core.Request over a net/http request; one pointer, so boxing it allocates
// nothing. Its Route is the request's Pattern, and its values its context's: an adapter
// whose framework keeps either elsewhere (Echo's c.Path, c.Set) passes it only where
// NeedsRequest is false, when core reads the headers and context alone.
type HTTPRequest struct{ R *http.Request }

// Context returns the request's context.
func (q HTTPRequest) Context() context.Context { return q.R.Context() }

// Method returns the request's method.
func (q HTTPRequest) Method() string { return q.R.Method }

// Path returns the request's URL path.
func (q HTTPRequest) Path() string { return q.R.URL.Path }

// Route returns the pattern the ServeMux matched, if any.
func (q HTTPRequest) Route() string { return q.R.Pattern }

// Header returns the first value of the request's header field name.
func (q HTTPRequest) Header(name string) string { return q.R.Header.Get(name) }

// Headers returns every value of the request's header field name.
func (q HTTPRequest) Headers(name string) []string { return q.R.Header.Values(name) }

// RemoteAddr returns the request's peer address.
func (q HTTPRequest) RemoteAddr() string { return q.R.RemoteAddr }

// Value returns the request context's value for key.
func (q HTTPRequest) Value(key any) any { return q.R.Context().Value(key) }
