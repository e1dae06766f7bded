package core

import (
	"strconv"
	"time"
)

// Response field names, in the canonical form net/http uses (so setting them allocates no
// canonicalized copy); HTTP field names are case-insensitive.
const (
	HeaderRateLimitPolicy = "Ratelimit-Policy"
	HeaderRateLimit       = "Ratelimit"
	HeaderRetryAfter      = "Retry-After"
	HeaderLimit           = "X-Ratelimit-Limit"
	HeaderRemaining       = "X-Ratelimit-Remaining"
	HeaderReset           = "X-Ratelimit-Reset"
)

// A HeaderSetter sets one response field: http.Header, and adapters' thin wrappers over
// their framework's response, implement it.
type HeaderSetter interface {
	Set(name, value string)
}

// HeaderMap is an http.Header (map[string][]string) as a HeaderSetter for the adapters
// whose framework writes through net/http (net/http, Gin, Echo): core.HeaderMap(w.Header()).
// Set stores core's names as they are, skipping http.Header.Set's canonicalization, since
// they are already canonical.
type HeaderMap map[string][]string

// Set replaces the field's values with value.
func (h HeaderMap) Set(name, value string) { h[name] = []string{value} }

// SetHeaders writes v's rate-limit fields in the configured style. A refusal also gets
// Retry-After in whole seconds, rounded up from the exact wait (at least 1). A skipped
// request gets none.
//
// The IETF fields follow draft-ietf-httpapi-ratelimit-headers-10: RateLimit-Policy lists
// every rate as `"3/1m";q=3;w=60`, and RateLimit reports the tightest as
// `"3/1m";r=REMAINING;t=SECONDS_UNTIL_ITS_QUOTA_IS_WHOLE`.
func (l *Limiter) SetHeaders(h HeaderSetter, v Verdict) {
	if v.Skipped {
		return
	}
	d := v.Decision
	if !v.Allow {
		h.Set(HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10))
	}
	if d.Limit == 0 { // the store failed and no decision was made
		return
	}
	style := l.cfg.headers
	if style == HeadersStandard || style == HeadersBoth {
		h.Set(HeaderRateLimitPolicy, l.policyField)
		h.Set(HeaderRateLimit, l.rateLimitField(d))
	}
	if style == HeadersLegacy || style == HeadersBoth {
		h.Set(HeaderLimit, strconv.Itoa(d.Limit))
		h.Set(HeaderRemaining, strconv.Itoa(d.Remaining))
		h.Set(HeaderReset, strconv.FormatInt(time.Now().Add(d.Reset).Add(time.Second-1).Unix(), 10))
	}
}

// rateLimitField formats the RateLimit field with one allocation.
func (l *Limiter) rateLimitField(d Decision) string {
	var buf [96]byte
	name := l.rateNames[0]
	if d.Rate >= 0 && d.Rate < len(l.rateNames) {
		name = l.rateNames[d.Rate]
	}
	b := append(buf[:0], '"')
	b = append(b, name...)
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilSeconds(d.Reset), 10)
	return string(b)
}

// PolicyField returns the RateLimit-Policy field value, fixed for the limiter's life.
func (l *Limiter) PolicyField() string { return l.policyField }
