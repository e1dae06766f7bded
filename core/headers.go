package core

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reqlimit/reqlimit/internal/hook"
	"github.com/reqlimit/reqlimit/internal/nocopy"
)

// setHeaders writes v's rate-limit fields in the configured style. A refusal also gets
// Retry-After in whole seconds, rounded up from the exact wait (at least 1), unless
// waiting cannot help. A skipped request gets none.
//
// The IETF fields follow draft-ietf-httpapi-ratelimit-headers-11: RateLimit-Policy lists
// every rate as `"3/1m";q=3;w=60`, and RateLimit reports the tightest as
// `"3/1m";r=REMAINING;t=SECONDS`, t being how long no more than r fit: Decision.Reset, until
// the oldest grant the rate counts leaves its window. On a refusal of cost 1 it is
// Retry-After. Where limits stack, Retry-After is the refusing limit's own wait: a limit
// before it may have nothing left for longer, which its own member shows, and a retry it
// refuses gets its wait then. Read back from the fields, that could not be told apart
// from a dry run's or a grant given back (WithCountWhen), which would keep a client
// waiting for nothing: a wait too short costs one more refusal, one too long cannot be
// taken back.
//
// v is a pointer because a verdict is about a hundred bytes, copied on every request
// otherwise; setHeaders does not keep it.
func (l *limiter) setHeaders(h hook.HeaderSetter, v *verdict, key string) {
	if v.Skipped {
		return
	}
	d := &v.Decision
	never := neverAdmitted(v)
	if !v.Allowed && !never {
		h.Set(hook.HeaderRetryAfter, strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10))
	}
	if d.Rate.Count == 0 { // the store failed and no decision was made
		return
	}
	style := l.cfg.headers
	if never || v.Undecided {
		// The key's state was not read: only the policy is known. The members of the
		// limits before this one stay; a refusal after a store failure says in the
		// legacy fields that nothing is left, rather than leave another limit's room on
		// a 429. (A cost above the limit leaves them: smaller requests have room.)
		if style == HeadersStandard || style == HeadersBoth {
			l.addPolicy(h)
		}
		if v.Undecided && !v.Allowed && (style == HeadersLegacy || style == HeadersBoth) {
			h.Set(hook.HeaderLimit, strconv.Itoa(d.Rate.Count))
			h.Set(hook.HeaderRemaining, "0")
			h.Set(hook.HeaderReset, strconv.FormatInt(time.Now().Add(d.RetryAfter).Add(time.Second-1).Unix(), 10))
		}
		return
	}
	if style == HeadersStandard || style == HeadersBoth {
		if l.cfg.pkSecret != nil {
			l.setPartitioned(h, d, key)
		} else if m, ok := h.(hook.HeaderMap); ok && (len(m) == 0 || len(m[hook.HeaderRateLimitPolicy]) == 0) {
			// No other limit set the fields (an empty map, the usual case, needs no lookup).
			// Shared, immutable one-element slices: no allocation per response when the
			// value is cached, one when it is not (a map keeps what it is given).
			field := l.fields.lookup(l, d)
			if field == nil {
				field = l.boxedField(d)
			}
			m[hook.HeaderRateLimitPolicy] = l.policyValue[:]
			m[hook.HeaderRateLimit] = field[:]
		} else {
			// Setters other than a HeaderMap copy the value (fasthttp does): an uncached
			// one is formatted in a pooled buffer, without allocating.
			var field string
			var buf *[fieldBufLen]byte
			if f := l.fields.lookup(l, d); f != nil {
				field = f[0]
			} else if _, keeps := h.(hook.HeaderMap); keeps {
				field = l.rateLimitField(d, l.rateNames)
			} else {
				buf = fieldBufs.Get().(*[fieldBufLen]byte)
				b := l.appendRateLimit(buf[:0], d, l.rateNames)
				field = nocopy.String(b)
			}
			if a, ok := h.(hook.HeaderAdder); ok {
				l.addMembers(a, d, field)
			} else {
				h.Set(hook.HeaderRateLimitPolicy, l.policyField)
				h.Set(hook.HeaderRateLimit, field)
			}
			if buf != nil {
				fieldBufs.Put(buf)
			}
		}
	}
	if style == HeadersLegacy || style == HeadersBoth {
		reset := time.Now().Add(d.Reset).Add(time.Second - 1).Unix()
		if a, ok := h.(hook.HeaderAdder); !ok || fewerLeft(a, d.Remaining, reset) {
			h.Set(hook.HeaderLimit, strconv.Itoa(d.Rate.Count))
			h.Set(hook.HeaderRemaining, strconv.Itoa(d.Remaining))
			h.Set(hook.HeaderReset, strconv.FormatInt(reset, 10))
		}
	}
}

// addPolicy adds the limit's RateLimit-Policy members beside those of the limits that ran
// before it on the request, under names they did not take, as addMembers does.
func (l *limiter) addPolicy(h hook.HeaderSetter) {
	a, ok := h.(hook.HeaderAdder)
	if !ok {
		h.Set(hook.HeaderRateLimitPolicy, l.policyField)
		return
	}
	lines := a.Values(hook.HeaderRateLimitPolicy)
	if len(lines) == 0 {
		a.Set(hook.HeaderRateLimitPolicy, l.policyField)
		return
	}
	_, policy := l.freeNames(lines)
	a.Add(hook.HeaderRateLimitPolicy, policy)
}

// fewerLeft reports whether a limit with remaining left until reset (unix seconds) binds
// more than the one whose legacy fields h holds, if any: these fields hold one value each,
// so where limits stack on a request the one with fewer left (then resetting later) must
// stand, or Remaining would name room another limit lacks. Where values can only be added
// (gRPC metadata), each limit adds its own only when it binds more than the last: the last
// value binds most.
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

// addMembers adds the limit's members to the RateLimit fields beside those of the limits
// that ran before it on the request, so that a route limit does not hide an app-wide one
// (a second line of a list field means a comma and more members). Names must differ
// between members: if another limit took one of this limit's, it uses its other names.
func (l *limiter) addMembers(h hook.HeaderAdder, d *Decision, field string) {
	policy := l.policyField
	lines := h.Values(hook.HeaderRateLimitPolicy)
	if len(lines) == 0 {
		h.Set(hook.HeaderRateLimitPolicy, policy)
		h.Set(hook.HeaderRateLimit, field)
		return
	}
	if taken(lines, l.rateNames) {
		var names []string
		names, policy = l.freeNames(lines)
		field = l.rateLimitField(d, names)
	}
	h.Add(hook.HeaderRateLimitPolicy, policy)
	h.Add(hook.HeaderRateLimit, field)
}

// freeNames returns the limit's member names that no member of lines takes, and its
// RateLimit-Policy value under them: its plain names, else its other names (altNames),
// else, where more limits of the same names stack on the request, the next free of
// "#3", "#4", ... (of "#name.2", "#name.3", ... after a WithScope name or tier), formatted
// per request: only three limits sharing a rate on one request get there. Middleware
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

// placeSuffix is the altSuffix of a limit without a WithScope name or tier: the second
// member of its names on the request.
const placeSuffix = "#2"

// taken reports whether a member of the RateLimit-Policy lines is named one of names.
func taken(lines, names []string) bool {
	for _, line := range lines {
		for _, n := range names {
			if i := strings.Index(line, `"`+n+`";`); i >= 0 {
				return true
			}
		}
	}
	return false
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
		if secs > maxCachedFields || int64(r.Count)+1 > int64(maxCachedFields-n)/(secs+1) {
			return fieldCache{}
		}
		c.secs = append(c.secs, int(secs))
		c.off = append(c.off, n)
		n += (r.Count + 1) * int(secs+1)
	}
	c.vals = make([]atomic.Pointer[[1]string], n)
	return c
}

// lookup returns the RateLimit field for d with the limit's own names, from the cache
// (filling it on first use), or nil when d's values are not among those cached.
func (c *fieldCache) lookup(l *limiter, d *Decision) *[1]string {
	i, secs := l.policy.indexOf(d.Rate), ceilSeconds(d.Reset)
	if c.vals == nil || i < 0 || i >= len(c.secs) || secs < 0 || secs > int64(c.secs[i]) || d.Remaining < 0 || d.Remaining > d.Rate.Count {
		return nil
	}
	e := &c.vals[c.off[i]+d.Remaining*(c.secs[i]+1)+int(secs)]
	v := e.Load()
	if v == nil {
		v = l.boxedField(d)
		e.Store(v) // racing stores write equal values: either may win
	}
	return v
}

// fieldBufLen holds any RateLimit member of a rate's own name: a name of at most 32
// bytes and two numbers of at most 19 digits, with room to spare.
const fieldBufLen = 96

// fieldBufs lends buffers for values that setters copy.
var fieldBufs = sync.Pool{New: func() any { return new([fieldBufLen]byte) }}

// A boxedField is a RateLimit value and its bytes in one allocation; most values fit the
// small one, which is half the size to allocate and clear.
type (
	boxedField struct {
		v [1]string
		b [fieldBufLen]byte
	}
	smallBoxedField struct {
		v [1]string
		b [fieldBufLen / 2]byte
	}
)

// boxedField formats the RateLimit field for d as a one-element value that a HeaderMap
// keeps, with one allocation: the member is measured first and written straight into
// the box.
func (l *limiter) boxedField(d *Decision) *[1]string {
	var m rateMember
	if l.member(&m, d, l.rateNames) {
		switch n := m.len(); {
		case n <= fieldBufLen/2:
			box := new(smallBoxedField)
			m.put(box.b[:n])
			box.v[0] = nocopy.String(box.b[:n])
			return &box.v
		case n <= fieldBufLen:
			box := new(boxedField)
			m.put(box.b[:n])
			box.v[0] = nocopy.String(box.b[:n])
			return &box.v
		}
	}
	return &[1]string{l.rateLimitField(d, l.rateNames)} // a long name: two allocations
}

// rateLimitField formats the RateLimit field with names, with one allocation.
func (l *limiter) rateLimitField(d *Decision, names []string) string {
	var buf [fieldBufLen]byte
	return string(l.appendRateLimit(buf[:0], d, names))
}

// appendRateLimit appends the RateLimit field for d, with names, to b.
func (l *limiter) appendRateLimit(b []byte, d *Decision, names []string) []byte {
	var m rateMember
	if l.member(&m, d, names) {
		n := m.len()
		b = slices.Grow(b, n)
		m.put(b[len(b) : len(b)+n])
		return b[:len(b)+n]
	}
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

// A rateMember is a RateLimit list member, `"NAME";r=R;t=T`, measured before it is
// written: a large policy formats one on every response, and written in place it needs
// neither a buffer to copy from nor an append's capacity check for each part. It is set
// through a pointer, field by field: a copy of it, read back right after its fields were
// stored, stalls.
type rateMember struct {
	name       string
	r, t       uint64
	rLen, tLen int
}

// member sets *m to d's member under names, unless its rate is not the policy's or a
// number is negative (neither happens with reqlimit's stores): appendRateLimit's general
// path.
func (l *limiter) member(m *rateMember, d *Decision, names []string) bool {
	i := l.policy.indexOf(d.Rate)
	r, t := int64(d.Remaining), ceilSeconds(d.Reset)
	if i < 0 || r < 0 || t < 0 {
		return false
	}
	m.name, m.r, m.t = names[i], uint64(r), uint64(t)
	m.rLen, m.tLen = decimalLen(m.r), decimalLen(m.t)
	return true
}

func (m *rateMember) len() int { return len(`"";r=;t=`) + len(m.name) + m.rLen + m.tLen }

// put writes the member into b, which is m.len() bytes long.
func (m *rateMember) put(b []byte) {
	b[0] = '"'
	k := 1 + copy(b[1:], m.name)
	b = b[k:]
	_ = b[3]
	b[0], b[1], b[2], b[3] = '"', ';', 'r', '='
	putDecimal(b[4:4+m.rLen], m.r)
	b = b[4+m.rLen:]
	_ = b[2]
	b[0], b[1], b[2] = ';', 't', '='
	putDecimal(b[3:], m.t)
}

// decimalLen returns the number of decimal digits of u: from its bit length, which gives
// the digits' count or one less.
func decimalLen(u uint64) int {
	// ⌊len·log₁₀2⌋ for u's bit length len: u has n or n+1 digits. 0 has one, as 1 has.
	u |= 1
	n := bits.Len64(u) * 1233 >> 12
	if u >= powersOf10[n] {
		n++
	}
	return n
}

var powersOf10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// putDecimal writes u's decimal digits into b, which is decimalLen(u) bytes long, from the
// end: four digits a step, each two a table's pair.
func putDecimal(b []byte, u uint64) {
	i := len(b)
	for u >= 10000 {
		q := u / 10000
		r := uint32(u - q*10000)
		hi := r / 100
		binary.LittleEndian.PutUint32(b[i-4:i], uint32(digitPair[hi])|uint32(digitPair[r-hi*100])<<16)
		i -= 4
		u = q
	}
	if u >= 100 {
		q := u / 100
		binary.LittleEndian.PutUint16(b[i-2:i], digitPair[u-q*100])
		i -= 2
		u = q
	}
	if u >= 10 {
		binary.LittleEndian.PutUint16(b[i-2:i], digitPair[u])
	} else {
		b[i-1] = byte('0' + u)
	}
}

// digitPair holds the two ASCII digits of each number below 100, the first in the low byte.
var digitPair = func() (p [100]uint16) {
	for n := range p {
		p[n] = uint16('0'+n/10) | uint16('0'+n%10)<<8
	}
	return p
}()

// sfName returns name as the inside of a Structured Field String (RFC 9651), as member
// names are kept: '"' and '\' escaped, and each byte a String cannot hold (outside
// printable ASCII), and '%' itself, written as %XX. Rate names need none of it; a tier's
// name, which the application chooses, may.
func sfName(name string) string {
	safe := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '%' {
			safe = false
			break
		}
	}
	if safe {
		return name
	}
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

// policyItem formats one rate of the RateLimit-Policy field. The window parameter w is
// whole seconds and optional: a period that is not a whole number of seconds leaves it
// out rather than advertise a window longer than the real one (5/10ms as w=1 would claim
// a hundredfold longer window); the item's name still spells the period.
func policyItem(name string, r Rate) string {
	item := `"` + name + `";q=` + strconv.Itoa(r.Count)
	if r.Period%time.Second == 0 {
		item += ";w=" + strconv.FormatInt(int64(r.Period/time.Second), 10)
	}
	return item
}
