package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlimit/reqlimit/internal/hook"
	"github.com/reqlimit/reqlimit/internal/nocopy"
)

// setHeaders writes v's rate-limit fields in the configured style (none for a skipped
// request), and on a refusal Retry-After, the wait rounded up to whole seconds, at least 1,
// unless waiting cannot help. The IETF fields follow draft-ietf-httpapi-ratelimit-headers-11:
// RateLimit-Policy lists every rate as `"3/1m";q=3;w=60`, RateLimit the tightest as
// `"3/1m";r=REMAINING;t=Decision.Reset`. Where limits stack, Retry-After is the refusing
// limit's own wait even if another has nothing left for longer (its member shows it): a
// wait too short costs one more refusal, one too long cannot be taken back.
func (l *limiter) setHeaders(h hook.HeaderSetter, v *verdict, key string) {
	if v.Skipped {
		return
	}
	d := &v.Decision
	hopeless := v.Err != nil && errors.Is(v.Err, ErrCostTooHigh) // waiting cannot help
	if !v.Allowed && !hopeless {
		h.Set(hook.HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10))
	}
	if d.Rate.Count == 0 { // the store failed and no decision was made
		return
	}
	style := l.cfg.headers
	// Not decided (a store failure, or a cost above the limit), only the policy is known. A
	// refusal after a store failure says in the legacy fields that nothing is left, rather
	// than leave another limit's room on a 429; a cost above the limit leaves them (smaller
	// requests have room).
	decided := !hopeless && !v.Undecided
	if style == HeadersStandard || style == HeadersBoth {
		switch {
		case !decided:
			l.setFields(h, nil, "")
		case l.cfg.pkSecret != nil:
			l.setFields(h, d, l.partitionKey(key))
		default:
			l.setMembers(h, d)
		}
	}
	if (style == HeadersLegacy || style == HeadersBoth) && (decided || v.Undecided && !v.Allowed) {
		remaining, wait := d.Remaining, d.Reset
		if !decided {
			remaining, wait = 0, d.RetryAfter
		}
		reset := time.Now().Add(wait).Add(time.Second - 1).Unix()
		if a, ok := h.(hook.HeaderAdder); !decided || !ok || fewerLeft(a, remaining, reset) {
			h.Set(hook.HeaderLimit, strconv.Itoa(d.Rate.Count))
			h.Set(hook.HeaderRemaining, strconv.Itoa(remaining))
			h.Set(hook.HeaderReset, strconv.FormatInt(reset, 10))
		}
	}
}

// setMembers sets the RateLimit fields or, after other limits on the request, adds its
// members beside theirs under names they did not take (see freeNames), so that a route
// limit does not hide an app-wide one: a second line of a list field means more members.
func (l *limiter) setMembers(h hook.HeaderSetter, d *Decision) {
	// A HeaderMap keeps the value it is given: a cached one or a new box. Other setters
	// copy it (fasthttp does) from a box the pool lends, so that it allocates nothing.
	m, keeps := h.(hook.HeaderMap)
	a, _ := h.(hook.HeaderAdder)
	var lines []string
	if a != nil {
		lines = a.Values(hook.HeaderRateLimitPolicy)
	}
	if len(lines) > 0 && taken(lines, l.rateNames) {
		l.setFields(h, d, "")
		return
	}
	f := l.cachedField(d)
	if f == nil && keeps {
		f = l.format(new(fieldBox), d)
	} else if f == nil {
		f = l.format(fieldBoxes.Get().(*fieldBox), d)
		defer fieldBoxes.Put(f)
	}
	switch {
	case len(lines) > 0:
		a.Add(hook.HeaderRateLimitPolicy, l.policyField)
		a.Add(hook.HeaderRateLimit, f.v[0])
	case keeps: // one-element values shared between responses: nothing to allocate
		m[hook.HeaderRateLimitPolicy] = l.policyValue[:]
		m[hook.HeaderRateLimit] = f.v[:]
	default:
		h.Set(hook.HeaderRateLimitPolicy, l.policyField)
		h.Set(hook.HeaderRateLimit, f.v[0])
	}
}

// setFields is setMembers' general form, which allocates: it sets or adds the limit's
// RateLimit-Policy members and, unless d is nil, its RateLimit member, params ending each.
func (l *limiter) setFields(h hook.HeaderSetter, d *Decision, params string) {
	var lines []string
	a, adds := h.(hook.HeaderAdder)
	if adds {
		lines = a.Values(hook.HeaderRateLimitPolicy)
	}
	names, policy := l.freeNames(lines)
	if params != "" {
		policy = formatPolicy(names, l.policy.rates, params)
	}
	set := h.Set
	if len(lines) > 0 {
		set = a.Add
	}
	set(hook.HeaderRateLimitPolicy, policy)
	if d != nil {
		set(hook.HeaderRateLimit, l.rateLimitField(d, names)+params)
	}
}

// fewerLeft reports whether a limit with remaining left until reset (unix seconds) binds
// more than the one whose legacy fields h holds, if any. These fields hold one value, so
// where limits stack the one with fewer left (then resetting later) must stand, or
// Remaining would name room another limit lacks. Of values that could not be replaced
// (gRPC metadata already sent), the last binds most.
func fewerLeft(h hook.HeaderAdder, remaining int, reset int64) bool {
	prev := h.Values(hook.HeaderRemaining)
	if len(prev) == 0 {
		return true
	}
	r, err := strconv.Atoi(prev[len(prev)-1])
	if err != nil || remaining != r {
		return err != nil || remaining < r
	}
	var t int64
	if v := h.Values(hook.HeaderReset); len(v) > 0 {
		t, _ = strconv.ParseInt(v[len(v)-1], 10, 64)
	}
	return reset > t
}

// freeNames returns the limit's member names that no member of lines takes, and its
// RateLimit-Policy value under them: its plain names, else altNames, else the first free of
// "#3", "#4", ... ("#name.2", "#name.3", ... after a WithScope name or tier). Middleware
// order is fixed by the code, so every instance of a build names a limit alike.
func (l *limiter) freeNames(lines []string) (names []string, policyField string) {
	if !taken(lines, l.rateNames) {
		return l.rateNames, l.policyField
	}
	names, policyField = l.altNames, l.altPolicyField
	for k := 2; taken(lines, names); k++ {
		suffix := l.altSuffix + "." + strconv.Itoa(k)
		if l.altSuffix == placeSuffix {
			suffix = "#" + strconv.Itoa(k+1)
		}
		names, policyField = l.names(suffix)
	}
	return names, policyField
}

// placeSuffix is the altSuffix of a limit without a WithScope name or tier: its place
// among the limits of its names on the request, counted from the plain one.
const placeSuffix = "#2"

// taken reports whether a member of the RateLimit-Policy lines is named one of names.
func taken(lines, names []string) bool {
	for _, line := range lines {
		for _, n := range names {
			if strings.Contains(line, `"`+n+`";`) {
				return true
			}
		}
	}
	return false
}

// A fieldBox is a RateLimit value and the bytes it views, in one allocation; b holds a
// member of a 20-byte name and two numbers of 10 digits (a longer one is allocated apart).
type fieldBox struct {
	v [1]string
	b [48]byte
}

// fieldBoxes lends boxes for values that setters copy.
var fieldBoxes = sync.Pool{New: func() any { return new(fieldBox) }}

// format sets f to d's RateLimit value under the limit's own names.
func (l *limiter) format(f *fieldBox, d *Decision) *fieldBox {
	f.v[0] = nocopy.String(l.appendRateLimit(f.b[:0], d, l.rateNames))
	return f
}

// fieldCache keeps the RateLimit values under the limit's own names, one per (rate,
// remaining, seconds) where those are few, so that a response to a HeaderMap allocates
// nothing. Entries are filled on first use and never change.
type fieldCache struct {
	off, secs []int // per rate: where its values start in vals, how many seconds values
	vals      []atomic.Pointer[fieldBox]
}

// maxCachedFields bounds a limiter's cache.
const maxCachedFields = 4096

func newFieldCache(p *Policy) (c fieldCache) {
	n := 0
	for i, r := range p.rates {
		secs := ceilSeconds(r.Period+time.Duration(p.gran[i])) + 2
		// Compared by division: counts and periods are large enough to overflow a product.
		if secs > maxCachedFields || r.Count >= (maxCachedFields-n)/int(secs) {
			return fieldCache{}
		}
		c.off, c.secs = append(c.off, n), append(c.secs, int(secs))
		n += (r.Count + 1) * int(secs)
	}
	c.vals = make([]atomic.Pointer[fieldBox], n)
	return c
}

// cachedField returns d's RateLimit value from the cache (filling it on first use), or nil
// when d's values are not among those cached.
func (l *limiter) cachedField(d *Decision) *fieldBox {
	c := &l.fields
	i, secs := l.policy.indexOf(d.Rate), ceilSeconds(d.Reset)
	if c.vals == nil || i < 0 || d.Remaining < 0 || d.Remaining > d.Rate.Count || secs < 0 || secs >= int64(c.secs[i]) {
		return nil
	}
	e := &c.vals[c.off[i]+d.Remaining*c.secs[i]+int(secs)]
	f := e.Load()
	if f == nil {
		f = l.format(new(fieldBox), d)
		e.Store(f) // racing stores write equal values: either may win
	}
	return f
}

// ceilSeconds returns d in whole seconds, rounded up: the fields' unit, in which a wait
// rounded down would send the client back too early.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// rateLimitField formats the RateLimit field with names.
func (l *limiter) rateLimitField(d *Decision, names []string) string {
	var buf [len(fieldBox{}.b)]byte
	return string(l.appendRateLimit(buf[:0], d, names))
}

// appendRateLimit appends the RateLimit field for d, with names, to b.
func (l *limiter) appendRateLimit(b []byte, d *Decision, names []string) []byte {
	b = append(b, '"')
	if i := l.policy.indexOf(d.Rate); i >= 0 {
		b = append(b, names[i]...)
	} else {
		b = append(b, d.Rate.String()...) // a rate of another policy, from a store that mixes them up
	}
	b = append(b, `";r=`...)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(d.Reset), 10)
}

// sfName returns name as the inside of a Structured Field String (RFC 9651): '"' and '\'
// escaped, and each byte a String cannot hold (outside printable ASCII), and '%' itself,
// written as %XX. Rate names need none of it; a tier's name, which the app chooses, may.
func sfName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e || c == '%':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// formatPolicy formats the RateLimit-Policy field of rates under names, params ending each
// member. The window w is whole seconds and optional: a period not of whole seconds leaves
// it out rather than advertise a longer window (5/10ms as w=1); the name still spells it.
func formatPolicy(names []string, rates []Rate, params string) string {
	items := make([]string, len(rates))
	for i, r := range rates {
		items[i] = `"` + names[i] + `";q=` + strconv.Itoa(r.Count)
		if r.Period%time.Second == 0 {
			items[i] += ";w=" + strconv.FormatInt(int64(r.Period/time.Second), 10)
		}
		items[i] += params
	}
	return strings.Join(items, ", ")
}
