package core

import (
	"strconv"
	"sync/atomic"
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
// they are already canonical. SetHeaders gives a HeaderMap the RateLimit fields as shared
// one-element slices, which is why it allocates nothing: append to them (which copies) or
// replace them, but never write into them in place.
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
//
// v is a pointer because a Verdict is about a hundred bytes, copied on every request
// otherwise; SetHeaders does not keep it.
func (l *Limiter) SetHeaders(h HeaderSetter, v *Verdict) {
	if v.Skipped {
		return
	}
	d := &v.Decision
	never := v.neverAdmitted()
	if !v.Allow && !never {
		h.Set(HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10))
	}
	if d.Limit == 0 { // the store failed and no decision was made
		return
	}
	style := l.cfg.headers
	if never {
		// The key's state was not read: only the policy is known.
		if style == HeadersStandard || style == HeadersBoth {
			h.Set(HeaderRateLimitPolicy, l.policyField)
		}
		return
	}
	if style == HeadersStandard || style == HeadersBoth {
		field := l.fields.rateLimit(l, d)
		if m, ok := h.(HeaderMap); ok {
			// Shared, immutable one-element slices: no allocation per response.
			m[HeaderRateLimitPolicy] = l.policyValue[:]
			m[HeaderRateLimit] = field[:]
		} else {
			h.Set(HeaderRateLimitPolicy, l.policyField)
			h.Set(HeaderRateLimit, field[0])
		}
	}
	if style == HeadersLegacy || style == HeadersBoth {
		h.Set(HeaderLimit, strconv.Itoa(d.Limit))
		h.Set(HeaderRemaining, strconv.Itoa(d.Remaining))
		h.Set(HeaderReset, strconv.FormatInt(time.Now().Add(d.Reset).Add(time.Second-1).Unix(), 10))
	}
}

// fieldCache keeps RateLimit field values already formatted, one per (rate, remaining,
// seconds) for policies where those are few, so that the standard fields cost no
// allocation per response. Entries are filled on first use and never change.
type fieldCache struct {
	secs []int // per rate: the largest seconds value cached
	off  []int // per rate: where its entries start in vals
	vals []atomic.Pointer[[1]string]
}

// maxCachedFields bounds a limiter's cache: 4096 pointers, 32 KiB at most.
const maxCachedFields = 4096

func newFieldCache(p *Policy) fieldCache {
	var c fieldCache
	n := 0
	for i, r := range p.rates {
		secs := ceilSeconds(r.Period+time.Duration(p.gran[i])) + 1
		// Compared before multiplying: counts and periods are large enough to overflow.
		if secs > maxCachedFields || int64(r.Count+1) > int64(maxCachedFields-n)/(secs+1) {
			return fieldCache{}
		}
		c.secs = append(c.secs, int(secs))
		c.off = append(c.off, n)
		n += (r.Count + 1) * int(secs+1)
	}
	c.vals = make([]atomic.Pointer[[1]string], n)
	return c
}

// rateLimit returns the RateLimit field for d, cached when it can be.
func (c *fieldCache) rateLimit(l *Limiter, d *Decision) *[1]string {
	i, secs := d.Rate, ceilSeconds(d.Reset)
	if c.vals == nil || i < 0 || i >= len(c.secs) || secs < 0 || secs > int64(c.secs[i]) || d.Remaining < 0 || d.Remaining > d.Limit {
		return &[1]string{l.rateLimitField(d)}
	}
	e := &c.vals[c.off[i]+d.Remaining*(c.secs[i]+1)+int(secs)]
	v := e.Load()
	if v == nil {
		v = &[1]string{l.rateLimitField(d)}
		e.Store(v) // racing stores write equal values: either may win
	}
	return v
}

// rateLimitField formats the RateLimit field with one allocation.
func (l *Limiter) rateLimitField(d *Decision) string {
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

// policyItem formats one rate of the RateLimit-Policy field. The window parameter w is
// whole seconds and optional: a period that is not a whole number of seconds leaves it
// out rather than advertise a window longer than the real one (5/10ms as w=1 would claim
// a hundredfold longer window); the item's name still spells the period.
func policyItem(name string, r Rate) string {
	item := strconv.Quote(name) + ";q=" + strconv.Itoa(r.Count)
	if r.Period%time.Second == 0 {
		item += ";w=" + strconv.FormatInt(int64(r.Period/time.Second), 10)
	}
	return item
}

// PolicyField returns the RateLimit-Policy field value, fixed for the limiter's life.
func (l *Limiter) PolicyField() string { return l.policyField }
