package core

import (
	"context"
	"fmt"
	"net/netip"
	"net/textproto"
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
	headers         HeaderStyle
	failMode        FailMode
	failStatus      int
	onError         func(ctx context.Context, err error)
	observer        func(Event)
	dryRun          bool
	trusted         []netip.Prefix
	forwardedHeader string
	frameworkIP     bool
	ipv6Bits        int
	denyStatus      int
	denyBody        string
	shortPeriods    bool
	extensions      map[any]any
}

// WithStore makes the limit keep its state in s instead of the process-wide default store.
func WithStore(s Store) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("WithStore(nil): a store is required")
		}
		c.store = s
		return nil
	}
}

// WithRate adds another rate to the route's limit: Limit(500, 2*time.Second,
// WithRate(2000, 10*time.Second)) admits a request only if both have room, and records it
// in both at once.
func WithRate(count int, period time.Duration) Option {
	return func(c *config) error {
		c.extraRates = append(c.extraRates, Rate{Count: count, Period: period})
		return nil
	}
}

// A KeyFunc names the client a request counts against. Returning "" or an error falls back
// to the client's IP address, so a missing credential never turns limiting off.
type KeyFunc func(Request) (string, error)

// WithKey counts requests per key(r) instead of per client IP. The route stays part of the
// bucket unless WithScope says otherwise.
func WithKey(key KeyFunc) Option {
	return func(c *config) error {
		if key == nil {
			return fmt.Errorf("WithKey(nil): a key function is required")
		}
		c.key = key
		return nil
	}
}

// KeyByHeader keys requests by the value of a request header, such as an API token.
// Requests without it are keyed by IP.
func KeyByHeader(name string) KeyFunc {
	return func(r Request) (string, error) { return r.Header(name), nil }
}

// KeyByValue keys requests by a value an earlier middleware stored on the request (a user
// ID set by authentication, say): Gin's and Echo's c.Set, Fiber's c.Locals, or a context
// value for net/http. Requests without it are keyed by IP.
func KeyByValue(key any) KeyFunc {
	return func(r Request) (string, error) {
		switch v := r.Value(key).(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		case fmt.Stringer:
			return v.String(), nil
		default:
			return fmt.Sprint(v), nil
		}
	}
}

// WithScope names the bucket's scope instead of the route pattern, so every route that
// uses the same scope (and policy) shares one quota per client. It is also how two limits
// registered apart ask to share buckets: without it, each registered limit has its own.
func WithScope(scope string) Option {
	return func(c *config) error { c.scope = scope; return nil }
}

// WithSkip exempts requests for which skip returns true: they are neither counted nor given
// rate-limit headers.
func WithSkip(skip func(Request) bool) Option {
	return func(c *config) error { c.skip = skip; return nil }
}

// WithCost charges cost(r) units for a request instead of 1.
func WithCost(cost func(Request) int) Option {
	return func(c *config) error { c.cost = cost; return nil }
}

// WithPenalty records refused requests too, so a client that keeps sending while refused
// stays refused. Under constant overload it gets nothing, not its quota: see Penalty.
func WithPenalty() Option {
	return func(c *config) error { c.mode = Penalty; return nil }
}

// WithShortPeriods lets the limit have periods below MinPeriod, for the rare limit that
// really means microseconds (pacing a hot internal call, a benchmark). Without it a period
// that short is refused at registration, since it is nearly always a missing unit.
func WithShortPeriods() Option {
	return func(c *config) error { c.shortPeriods = true; return nil }
}

// WithDryRun decides and reports every request (headers, observer, error hook) but never
// refuses one, for trying a limit on live traffic.
func WithDryRun() Option {
	return func(c *config) error { c.dryRun = true; return nil }
}

// A HeaderStyle chooses the rate-limit response fields.
type HeaderStyle uint8

const (
	// HeadersStandard sends the IETF fields RateLimit-Policy and RateLimit.
	HeadersStandard HeaderStyle = iota
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
	// (Reset in unix seconds).
	HeadersLegacy
	// HeadersBoth sends both sets.
	HeadersBoth
	// HeadersOff sends no rate-limit fields. A refusal still carries Retry-After.
	HeadersOff
)

// WithHeaders chooses the rate-limit response fields (HeadersStandard by default).
func WithHeaders(style HeaderStyle) Option {
	return func(c *config) error {
		if style > HeadersOff {
			return fmt.Errorf("WithHeaders(%d): unknown header style", style)
		}
		c.headers = style
		return nil
	}
}

// A FailMode says what happens to a request when the store fails (unreachable, timed out).
type FailMode uint8

const (
	// FailOpen admits the request. It is the default: an outage of the limiter's store
	// does not become an outage of the application.
	FailOpen FailMode = iota
	// FailClosed refuses the request, with 429 unless WithFailStatus says otherwise.
	FailClosed
	// FailLocal decides the request in a local in-memory store, so each instance still
	// enforces the limit on its own until the shared store is back.
	FailLocal
)

// WithFailMode chooses what happens when the store fails; the error hook is told either way.
func WithFailMode(m FailMode) Option {
	return func(c *config) error {
		if m > FailLocal {
			return fmt.Errorf("WithFailMode(%d): unknown fail mode", m)
		}
		c.failMode = m
		return nil
	}
}

// WithFailStatus sets the status of refusals caused by a store failure under FailClosed,
// 429 by default; 503 is the other usual choice.
func WithFailStatus(code int) Option {
	return func(c *config) error {
		if code < 400 || code > 599 {
			return fmt.Errorf("WithFailStatus(%d): want a 4xx or 5xx status", code)
		}
		c.failStatus = code
		return nil
	}
}

// WithErrorHook calls hook with every store error. Without it, errors are logged through
// log/slog at most once a second.
func WithErrorHook(hook func(ctx context.Context, err error)) Option {
	return func(c *config) error { c.onError = hook; return nil }
}

// WithObserver calls observe after every decision, for metrics and logs. It runs on the
// request's goroutine: keep it quick, and copy what it keeps.
func WithObserver(observe func(Event)) Option {
	return func(c *config) error { c.observer = observe; return nil }
}

// WithDenyResponse sets the status and plain-text body of refusals (429 and "Too Many
// Requests" by default). Adapters also offer a deny handler in their framework's idiom.
func WithDenyResponse(status int, body string) Option {
	return func(c *config) error {
		if status < 400 || status > 599 {
			return fmt.Errorf("WithDenyResponse(%d, ...): want a 4xx or 5xx status", status)
		}
		c.denyStatus, c.denyBody = status, body
		return nil
	}
}

// WithTrustedProxies makes a forwarded header count, but only on connections from the
// given proxies (CIDRs such as "10.0.0.0/8" or single addresses). The header is
// X-Forwarded-For unless WithForwardedHeader names the one your proxies set; it is walked
// from the right past trusted hops, and the first untrusted address is the client. Without
// this option forwarded headers are ignored: any client can forge them.
func WithTrustedProxies(cidrs ...string) Option {
	return func(c *config) error {
		for _, s := range cidrs {
			p, err := parsePrefix(s)
			if err != nil {
				return fmt.Errorf("WithTrustedProxies: %w", err)
			}
			c.trusted = append(c.trusted, p)
		}
		return nil
	}
}

// WithForwardedHeader names the header your trusted proxies set, and the only one read:
// "X-Forwarded-For" (the default) or "Forwarded" (RFC 7239), both chains walked from the
// right, or a header holding the client's address alone, such as "X-Real-IP" or
// "CF-Connecting-IP". Other forwarded headers are ignored, since a proxy passes them on
// from the client unchanged. It takes effect with WithTrustedProxies.
func WithForwardedHeader(name string) Option {
	return func(c *config) error {
		name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		if name == "" {
			return fmt.Errorf("WithForwardedHeader(%q): a header name is required", name)
		}
		c.forwardedHeader = name
		return nil
	}
}

// WithClientIPFromFramework takes the client IP from the framework's own logic (Gin's
// c.ClientIP, Echo's c.RealIP, Fiber's proxy header), for applications that configured
// their framework's trusted proxies. Gin and Echo applications opt in here once their
// framework trusts only their proxies: Gin trusts every proxy until SetTrustedProxies is
// called, and Echo's extractors trust every private, loopback and link-local peer unless
// told otherwise. Fiber with EnableTrustedProxyCheck is detected without it.
func WithClientIPFromFramework() Option {
	return func(c *config) error { c.frameworkIP = true; return nil }
}

// WithIPv6Prefix groups IPv6 clients by their first bits bits (64 by default: one
// subscriber usually holds a whole /64 and can rotate through it). 128 keys every address
// on its own.
func WithIPv6Prefix(bits int) Option {
	return func(c *config) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("WithIPv6Prefix(%d): want 1 to 128", bits)
		}
		c.ipv6Bits = bits
		return nil
	}
}

// withExtension attaches an adapter-specific setting, such as a deny handler in the
// framework's idiom, under key; adapters reach it through package hook.
func withExtension(key, value any) Option {
	return func(c *config) error {
		if c.extensions == nil {
			c.extensions = map[any]any{}
		}
		c.extensions[key] = value
		return nil
	}
}

func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad proxy address or CIDR %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
