package core

import (
	"context"
	"fmt"
	"net/netip"
	"net/textproto"
	"slices"
	"sort"
	"strings"
	"time"
)

// An Option configures a limit. The same options work with every adapter.
type Option func(*config) error

type config struct {
	store           Store
	extraRates      []Rate
	key             KeyFunc
	scope           string
	skip            func(Request) bool
	cost            func(Request) int
	mode            Mode
	countWhen       func(status int) bool
	headers         HeaderStyle
	failMode        FailMode
	failStatus      int
	onError         func(ctx context.Context, err error)
	observer        func(Event)
	dryRun          bool
	trusted         []netip.Prefix
	trustUnix       bool // WithTrustedProxies("unix")
	allow           []netip.Prefix
	pkSecret        []byte
	quota           *Quota
	tierPick        func(Request) string
	tierPolicies    map[string]*Policy
	forwardedHeader string
	frameworkIP     bool
	noWarnings      bool // WithWarnings(false)
	ipv6Bits        int
	denyStatus      int
	denyBody        string
	shortPeriods    bool
	extensions      map[any]any
}

// WithStore keeps the limit's grants in s rather than in the default store.
func WithStore(s Store) Option {
	return func(c *config) error {
		c.store = s
		return checkStore("WithStore", s)
	}
}

// WithRate adds a rate: Limit(500, 2*time.Second, WithRate(2000, 10*time.Second)) admits
// only if both have room, and records in both.
func WithRate(count int, period time.Duration) Option {
	return func(c *config) error {
		c.extraRates = append(c.extraRates, Rate{Count: count, Period: period})
		return nil
	}
}

// A KeyFunc names the client a request counts against. "" or an error (for the error
// hook) falls back to the client's IP, a key apart from IP-keyed limits' (WithScope): a
// missing credential never turns limiting off.
type KeyFunc func(Request) (string, error)

// WithKey counts per key(r) instead of per client IP, still per route.
func WithKey(key KeyFunc) Option {
	return func(c *config) error {
		c.key = key
		return require(key != nil, "WithKey(nil): a key function is required")
	}
}

// KeyByHeader keys requests by a request header, such as an API token checked before the
// limit: each value a client makes up gets a quota of its own. A name no header can have
// ("" included) makes every request's key an error (see KeyFunc), not a key never there.
func KeyByHeader(name string) KeyFunc {
	field := strings.TrimSpace(name)
	if !isFieldName(field) {
		err := fmt.Errorf("KeyByHeader(%q): a header name is required (letters, digits and !#$%%&'*+-.^_`|~ only), such as \"X-Api-Key\"", name)
		return func(Request) (string, error) { return "", err }
	}
	return func(r Request) (string, error) { return r.Header(field), nil }
}

// WithScope names the buckets' scope instead of the route: limits of one scope and policy
// share a quota per client; otherwise each limit has its own.
func WithScope(scope string) Option {
	return func(c *config) error {
		c.scope = scope
		return require(scope != "", `WithScope(""): a scope name is required; leave the option out for the route's own buckets`)
	}
}

// WithSkip exempts a request r if skip(r): not counted, no rate-limit fields.
func WithSkip(skip func(Request) bool) Option {
	return func(c *config) error { c.skip = skip; return nil }
}

// WithCost charges cost(r) units (at least 1) for a request instead of 1. A cost above
// the limit gets 413 without Retry-After; the error hook is told.
func WithCost(cost func(Request) int) Option {
	return func(c *config) error { c.cost = cost; return nil }
}

// WithPenalty records refused requests too (see Penalty).
func WithPenalty() Option {
	return func(c *config) error { c.mode = Penalty; return nil }
}

// WithShortPeriods allows periods below 1 ms, else refused as a missing unit.
func WithShortPeriods() Option {
	return func(c *config) error { c.shortPeriods = true; return nil }
}

// WithDryRun decides and reports every request but refuses none.
func WithDryRun() Option {
	return func(c *config) error { c.dryRun = true; return nil }
}

// A HeaderStyle chooses the rate-limit response fields.
type HeaderStyle uint8

const (
	// HeadersStandard sends the IETF fields RateLimit-Policy and RateLimit.
	HeadersStandard HeaderStyle = iota
	// HeadersLegacy sends X-RateLimit-Limit, -Remaining and -Reset (in unix seconds).
	HeadersLegacy
	HeadersBoth // both sets
	// HeadersOff sends no rate-limit fields; a refusal still carries Retry-After.
	HeadersOff
)

// WithHeaders chooses the response fields: HeadersStandard by default.
func WithHeaders(style HeaderStyle) Option {
	return func(c *config) error {
		c.headers = style
		return require(style <= HeadersOff, "WithHeaders(%d): unknown header style", style)
	}
}

// A FailMode says what a request gets when the store fails. One whose context ends
// before an answer is refused in every mode: hanging up skips no limit.
type FailMode uint8

const (
	// FailOpen, the default, admits: a store outage does not become an outage of the app.
	FailOpen FailMode = iota
	// FailClosed refuses the request, with 503 Service Unavailable and Retry-After: 1
	// unless WithFailStatus says otherwise (gRPC: Unavailable): the service cannot decide,
	// and a 429 would tell the client that it sent too much.
	FailClosed
	// FailLocal decides in a local memory store: each instance limits on its own.
	FailLocal
)

// WithFailMode chooses what a store failure does; the error hook is told.
func WithFailMode(m FailMode) Option {
	return func(c *config) error {
		c.failMode = m
		return require(m <= FailLocal, "WithFailMode(%d): unknown fail mode", m)
	}
}

// WithFailStatus sets the status of undecided requests (FailClosed's refusals, requests
// that ended first): 4xx or 5xx, 503 by default. Each carries Retry-After: 1 and the
// status's text as body ("Rate Limit Unavailable" for a status without one), or the deny
// body (WithDenyResponse) if it is the deny status.
// gRPC calls get Unavailable whatever the status.
func WithFailStatus(code int) Option {
	return func(c *config) error {
		c.failStatus = code
		return require(code >= 400 && code <= 599, "WithFailStatus(%d): want a 4xx or 5xx status", code)
	}
}

// WithErrorHook calls hook with every error but a hang-up, and with the limit's warnings
// (WithWarnings); without it, slog logs errors at most once a second.
func WithErrorHook(hook func(ctx context.Context, err error)) Option {
	return func(c *config) error { c.onError = hook; return nil }
}

// WithObserver adds observe to what every decision calls, on its goroutine.
func WithObserver(observe func(Event)) Option {
	return func(c *config) error {
		// Added, not replaced: both metrics integrations, or metrics and a log, all see.
		switch prev := c.observer; {
		case prev == nil:
			c.observer = observe
		case observe != nil:
			c.observer = func(e Event) { prev(e); observe(e) }
		}
		return nil
	}
}

// WithDenyResponse sets the status (4xx or 5xx) and text of refusals, 429 "Too Many
// Requests" by default; an adapter's WithDenyHandler takes a handler.
func WithDenyResponse(status int, body string) Option {
	return func(c *config) error {
		c.denyStatus, c.denyBody = status, body
		return require(status >= 400 && status <= 599, "WithDenyResponse(%d, ...): want a 4xx or 5xx status", status)
	}
}

// WithTrustedProxies makes a forwarded header count, but only from these proxies (CIDRs
// such as "10.0.0.0/8", addresses, "unix" for a peer without one): walked from the right
// past trusted hops, its first untrusted address is the client. Else it is ignored, and
// from a loopback, private or link-local peer warned of once (WithWarnings).
func WithTrustedProxies(cidrs ...string) Option {
	return func(c *config) error {
		from, names := len(c.trusted), make([]string, 0, len(cidrs))
		for _, s := range cidrs {
			if s == "unix" {
				c.trustUnix = true
				continue
			}
			p, ok := parsePrefix(s)
			if !ok {
				return fmt.Errorf("WithTrustedProxies: bad proxy address or CIDR %q: want one such as 10.0.0.0/8 or 10.0.0.1, or \"unix\"", s)
			}
			c.trusted, names = append(c.trusted, p), append(names, s)
		}
		if i := firstCover(c.trusted, from); i >= 0 {
			// Every hop trusted, the client's own leftmost entry would be its key.
			return fmt.Errorf("WithTrustedProxies(%q): the trusted ranges now hold every %s address, so each client names itself in the forwarded header, a new bucket per request; name your proxies' addresses", names[i-from], family(c.trusted[i].Addr()))
		}
		return nil
	}
}

// WithForwardedHeader names the one header the trusted proxies set: "X-Forwarded-For" (the
// default) or "Forwarded", chains walked from the right, or a single-address header such
// as "X-Real-IP", whose last line counts. Other forwarded headers are ignored.
func WithForwardedHeader(name string) Option {
	return func(c *config) error {
		c.forwardedHeader = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		// A name no request can carry would never be found: every request would be keyed
		// by the proxy, without a word.
		return require(isFieldName(c.forwardedHeader), "WithForwardedHeader(%q): a header name is required (letters, digits and !#$%%&'*+-.^_`|~ only), such as \"X-Real-IP\"", name)
	}
}

// tokenChars are the bytes of an RFC 9110 token, which an HTTP field name is.
const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"

// isFieldName reports whether s is an HTTP field name: trimming every token byte leaves
// nothing.
func isFieldName(s string) bool { return s != "" && strings.Trim(s, tokenChars) == "" }

// WithClientIPFromFramework keys by Gin's c.ClientIP or Echo's c.RealIP once the framework
// trusts only your proxies. Where it would take any client's word (Gin before
// engine.SetTrustedProxies, Echo without a safe IPExtractor, Fiber v2 with a chain
// ProxyHeader), the limit keys by the peer instead and warns once (WithWarnings). On
// Fiber v2 a single-address ProxyHeader counts from TrustedProxies without it and, with
// it, from any client if EnableTrustedProxyCheck is off. Fiber v3 ignores it.
func WithClientIPFromFramework() Option {
	return func(c *config) error { c.frameworkIP = true; return nil }
}

// WithIPv6Prefix groups IPv6 clients by their first bits bits: 64 by default, since one
// subscriber usually holds a whole /64 and can rotate through it.
func WithIPv6Prefix(bits int) Option {
	return func(c *config) error {
		c.ipv6Bits = bits
		return require(bits >= 1 && bits <= 128, "WithIPv6Prefix(%d): want 1 to 128", bits)
	}
}

// withExtension attaches an adapter's own setting (a deny handler in the framework's
// idiom) under key.
func withExtension(key, value any) Option {
	return func(c *config) error {
		if c.extensions == nil {
			c.extensions = map[any]any{}
		}
		c.extensions[key] = value
		return nil
	}
}

// require returns nil if ok, else an option's error naming the bad value.
func require(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// parsePrefix reads a CIDR prefix or an address, IPv4-mapped ones as IPv4, and reports
// whether s is one.
func parsePrefix(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if a, err2 := netip.ParseAddr(s); err2 == nil { // an address has no "/", so err != nil
		p, err = netip.PrefixFrom(a, a.BitLen()), nil
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		// ::ffff:10.0.0.0/104 means 10.0.0.0/8: addresses are matched unmapped.
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), err == nil
}

// firstCover returns the index, from on, of the prefix with which prefixes first hold every
// address of a family, or -1 if they never do: trusted or allowed, they would leave that
// family unlimited however they spell it ("0.0.0.0/0", or "0.0.0.0/1" and "128.0.0.0/1").
// Those before from hold no family whole. One check per option, not per prefix, keeps a
// long list (a country's ranges, say) from costing its square at registration.
func firstCover(prefixes []netip.Prefix, from int) int {
	if !coversAll(prefixes) {
		return -1
	}
	// Adding prefixes only adds addresses: the first head that holds a family is found
	// by halving.
	return from + sort.Search(len(prefixes)-from, func(i int) bool { return coversAll(prefixes[:from+i+1]) })
}

// coversAll reports whether prefixes together hold every address of a family. Clients are
// matched unmapped (inAny), so IPv6 needs no cover for the IPv4-mapped range. It walks the
// prefixes in order of their first address, up from each family's first address, past
// the end of each prefix that holds it, until one is missing or the family ends.
func coversAll(prefixes []netip.Prefix) bool {
	sorted := slices.SortedFunc(slices.Values(prefixes), func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for _, next := range [...]netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		for _, p := range sorted {
			if next.Is4In6() {
				next = afterMapped
			}
			if p.Addr().BitLen() != next.BitLen() || lastAddr(p).Less(next) {
				continue
			}
			if next.Less(p.Addr()) {
				break // next is in no prefix
			}
			if next = lastAddr(p).Next(); !next.IsValid() {
				return true
			}
		}
	}
	return false
}

// afterMapped is the address after the IPv4-mapped range ::ffff:0:0/96.
var afterMapped = netip.MustParseAddr("::1:0:0:0")

// lastAddr returns the last address of p, which is masked.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		b[i] |= 0xff >> min(8, max(0, p.Bits()-8*i)) // the byte's host bits
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
