// Package hook joins package core to the adapters without a public API between them: core
// registers how to build a limit (a Core), and package adapter gives it to the adapters
// with core's types filled in. It imports nothing of reqlimit's, so that core can import
// it: its types take core's as type parameters.
package hook

import "strings"

// Input is what an adapter knows of a request. R is core.Request.
type Input[R any] struct {
	// Route is the matched route pattern, "" when the adapter does not know it. All
	// requests with an unknown route share one bucket per client: never one per path,
	// which a client could vary at will.
	Route string
	// Peer is the connection's peer address ("host:port"), or the framework's client IP
	// when the application configured its framework's trusted proxies.
	Peer string
	// Forwarded reports that Peer is the client a proxy the framework trusts named, not
	// the connection's peer: the request's forwarded headers are then that proxy's doing,
	// and no sign of a proxy nobody trusted.
	Forwarded bool
	// Request gives key, skip and cost functions the request; it may be nil when the
	// limit does not need it (NeedsRequest).
	Request R
}

// Verdict is a limit's answer for one request. D is core.Decision.
type Verdict[D any] struct {
	Decision D    // the store's decision; zero when skipped or when the store failed open
	Allowed  bool // the request goes on to the handler
	Status   int  // the response status when Allowed is false
	Skipped  bool // a skip rule exempted the request: send no rate-limit fields
	// Undecided reports a refusal the store failed to decide: Decision names only the rate.
	Undecided bool
	// Err is the store's error, if it failed, or why the request can never be admitted.
	Err error
	// Release is not nil when the request's slot is given back if its response does not
	// count: the adapter then learns the response's status and passes it to Settle.
	Release any
}

// A HeaderSetter sets one response field. Values may be transient (in a buffer reused once
// Set returns): a HeaderSetter other than a HeaderMap must copy what it keeps, as fasthttp
// does. Names are only ever the Header constants below, so a setter may keep them as they
// are (TestFieldNamesAreTheHeaderConstants).
type HeaderSetter interface {
	Set(name, value string)
}

// A HeaderAdder also reads a field's lines and adds one: the RateLimit fields are lists to
// which every limit on a request adds its members. Through a HeaderSetter that is not a
// HeaderAdder, only the last limit's members show.
type HeaderAdder interface {
	HeaderSetter
	Values(name string) []string
	Add(name, value string)
}

// HeaderMap is an http.Header as a HeaderSetter, for adapters whose framework writes
// through net/http. The limit gives a HeaderMap its RateLimit fields as one-element
// slices shared between responses, so that setting them allocates nothing: adapters never
// write into them.
type HeaderMap map[string][]string

// Set replaces the field's values with value.
func (h HeaderMap) Set(name, value string) { h[name] = []string{value} }

// Values returns the field's lines.
func (h HeaderMap) Values(name string) []string { return h[name] }

// Add adds a line to the field, copying the slice there, which may be shared.
func (h HeaderMap) Add(name, value string) {
	old := h[name]
	h[name] = append(old[:len(old):len(old)], value)
}

// Response field names, in the canonical form net/http uses.
const (
	HeaderRateLimitPolicy = "Ratelimit-Policy"
	HeaderRateLimit       = "Ratelimit"
	HeaderRetryAfter      = "Retry-After"
	HeaderLimit           = "X-Ratelimit-Limit"
	HeaderRemaining       = "X-Ratelimit-Remaining"
	HeaderReset           = "X-Ratelimit-Reset"
)

// BatchKey is the extension key under which an adapter that registers several limits in
// one call (grpclimit.New, one per method) puts a value of that call's own: a Quota holds
// the last such call's limits from a place together.
type BatchKey struct{}

// NoFrameworkIPKey is the extension key under which an adapter whose framework has no
// client IP of its own (net/http) marks its limits: core.WithClientIPFromFramework is then
// refused where the limit is registered, rather than ignored.
type NoFrameworkIPKey struct{}

// HostOf strips the port and brackets from a "host:port" address; a bare host (with or
// without brackets, IPv6 or not) comes back as is, an IPv6 zone kept. Unlike
// net.SplitHostPort it makes no error, an allocation, for the bare hosts frameworks give.
func HostOf(s string) string {
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 0 {
			return s[1:end]
		}
		return s[1:]
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		return s[:i] // exactly one colon: host:port
	}
	return s // no colon (a bare IPv4 or name), or several (a bare IPv6)
}
