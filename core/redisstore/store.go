// Package redisstore is a core.Store kept in Redis, so that every process enforcing a limit
// shares it: strict sliding windows, decided and recorded by one Lua script in one round
// trip, on the Redis server's clock.
//
// It works with any redis.UniversalClient: a single node, a Sentinel failover client or a
// Cluster client. Each decision touches exactly one key, named prefix + "{" + hash + "}",
// so a Cluster routes it by the hash alone, whatever the route or client key holds.
// The script and key layout are described beside the code (exact.lua, bounded.lua); the
// costs are measured by docs/bench/redis.
package redisstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// DefaultPrefix starts every key the store writes unless WithPrefix says otherwise.
const DefaultPrefix = "reqlimit:"

// DefaultTimeout bounds each decision's round trip unless WithTimeout says otherwise. A rate
// limiter sits in front of every request, so it must fail fast and let the caller's
// fail-open, fail-closed or local-fallback policy decide.
const DefaultTimeout = 100 * time.Millisecond

// The scripts are shared by every Store, their SHA-1s computed once, in Go: exactScript
// decides the policies whose rates are all exact, boundedScript those with a bounded
// rate; releaseScript and resetScript serve both layouts, told where the fields are by
// the plan (see layoutOf).
var (
	//go:embed exact.lua
	exactSrc string
	//go:embed bounded.lua
	boundedSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed reset.lua
	resetSrc string

	exactScript   = redis.NewScript(exactSrc)
	boundedScript = redis.NewScript(boundedSrc)
	releaseScript = redis.NewScript(releaseSrc)
	resetScript   = redis.NewScript(resetSrc)
)

// Store is a core.Store in Redis. Create it with New; it is safe for concurrent use. It
// keeps no goroutine beyond its work (one that sends queued decisions ends when the queue
// is empty), so there is nothing to close (the client is the caller's).
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	clock   func() time.Time
	deny    *denyCache
	// guard sends from a goroutine so that the deadline holds even when the client
	// ignores context deadlines on the socket (go-redis's ContextTimeoutEnabled is false).
	guard   bool
	flights int
	pause   time.Duration // refusedPause; tests shorten or lengthen it
	queue   queue         // a single server's (see batch.go)
	nodes   sync.Map      // a Cluster master's address -> its *queue
	// plans caches each policy's part of the script's arguments, keyed by the policy.
	plans  sync.Map
	nplans atomic.Int64
}

// An Option configures a Store.
type Option func(*Store)

// WithPrefix sets the text every key starts with (default DefaultPrefix), e.g. to share a
// Redis database between applications. Braces are removed from it: the key's hash tag
// must be the per-key hash, or a Cluster would put every key in one slot.
func WithPrefix(prefix string) Option {
	return func(s *Store) {
		s.prefix = strings.NewReplacer("{", "", "}", "").Replace(prefix)
	}
}

// WithTimeout bounds each decision (default DefaultTimeout); d <= 0 means the default.
// The caller's context deadline still applies when it is earlier.
func WithTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithFlights sets how many sends the Store keeps on the wire to each server (each master,
// in a Cluster) at once (default DefaultFlights); n <= 0 means the default. Decisions that
// arrive while all are out wait and leave together, as one pipeline, on the next flight:
// fewer flights make longer pipelines and fewer round trips; more, shorter waits.
func WithFlights(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.flights = n
		}
	}
}

// WithDenyCache turns the local deny cache on (the default) or off. While Redis has said a
// key is refused for the next R, Enforce and Peek queries of the same cost are refused
// locally, with RetryAfter, Reset and FullReset counting down, without a round trip: while
// only time frees a slot, the refusal and its wait are what Redis would give (for a cost
// above 1, Remaining stays the value at the refusal). A Reset or Release frees one too, but
// reaches only its own process's cache: another process keeps refusing the key until its
// cached wait ends, up to the period. Turn the cache off in every process where a Reset
// must free a key everywhere at once (core.Quota.Reset after a password reset). Penalty
// queries always go to Redis, since each refusal must be recorded there. The cache holds
// at most 65,536 keys.
func WithDenyCache(on bool) Option {
	return func(s *Store) {
		if on {
			s.deny = newDenyCache(defaultDenyCap)
		} else {
			s.deny = nil
		}
	}
}

// WithClock makes the script take its time from now, not from the Redis server. It is
// FOR TESTS AND SIMULATIONS ONLY: several processes with their own clocks would disagree
// about windows, which is why the default reads the server's TIME. Keys written under a
// clock get no expiry, since the clock's time is not the server's; use a throwaway
// database.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.clock = now } }

// New returns a Store that keeps its keys through client; it panics if client is nil.
//
// New adds a hook to client (for a Cluster, to each master's client as the store first
// sends to it) that notes how connection attempts end and passes everything through
// unchanged. go-redis tries a failed connection again and again until the deadline, and
// then reports only the deadline: with the hook, a decision made while Redis is
// unreachable names the connection's error instead, and when the connection is refused
// (nothing listens at the address, the host cannot be reached, the name does not resolve)
// the decisions waiting for the server fail at once with that error, and for the next
// second decisions fail without being sent; then one at a time is sent, to find the
// server back, and any connection made or answer received ends the pause. go-redis's
// log lines about failed dials are its own; see docs/redis.md for routing them.
func New(client redis.UniversalClient, opts ...Option) *Store {
	// A nil client is refused here, where the store is built, rather than by a nil
	// dereference in the first decision, which a fail mode would not see.
	const create = "create it with redis.NewClient, NewFailoverClient or NewClusterClient"
	if client == nil {
		panic("redisstore.New(nil): a go-redis client is required: " + create)
	}
	if v := reflect.ValueOf(client); v.Kind() == reflect.Pointer && v.IsNil() {
		panic(fmt.Sprintf("redisstore.New: the client is a nil %T: %s", client, create))
	}
	s := &Store{
		client:  client,
		prefix:  DefaultPrefix,
		timeout: DefaultTimeout,
		deny:    newDenyCache(defaultDenyCap),
		guard:   !honorsContext(client),
		flights: DefaultFlights,
		pause:   refusedPause,
	}
	for _, o := range opts {
		o(s)
	}
	if _, ok := client.(*redis.ClusterClient); !ok {
		// A Cluster client's own hooks never see a dial: its nodes' clients dial.
		client.AddHook(dialWatch{&s.queue})
	}
	return s
}

// honorsContext reports whether the client applies context deadlines to its sockets.
func honorsContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Key returns the Redis key that holds the state of (policy, scope, key), for operators
// and tests: prefix + "{" + 32 hex digits + "}". The digits are the first 16 bytes of the
// SHA-256 of the length-prefixed layout generation, policy text, scope and key, the same
// in every process. scope is the one a limit decides in: its WithScope name, or its route
// with an ident added, named by where the code registered the limit (see "Sharing one
// Redis" in docs/redis.md).
func (s *Store) Key(p *core.Policy, scope, key string) string {
	h := hashOf(s.plan(p).layout, p, scope, key)
	return s.keyName(h)
}

func (s *Store) keyName(h [16]byte) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + 34)
	b.WriteString(s.prefix)
	b.WriteByte('{')
	var hx [32]byte
	hex.Encode(hx[:], h[:])
	b.Write(hx[:])
	b.WriteByte('}')
	return b.String()
}

// hashOf names a bucket. Length prefixes keep ("/a", "b") and ("/ab", "") apart; SHA-256
// rather than a seeded hash because every process must derive the same key.
func hashOf(layout string, p *core.Policy, scope, key string) [16]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range [...]string{layout, p.String(), scope, key} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return [16]byte(sum[:16])
}

// The generations of the scripts' value layouts, part of every key: a release that
// changes a layout changes its generation, so that its scripts never misread a value an
// older release wrote (a misread ring could admit a request too many). During a rolling
// upgrade across such a change, old and new processes then count in separate buckets
// until the old ones are gone; see docs/redis.md. exact.lua keeps the layout of the exact
// scripts before it.
const (
	exactLayout   = "reqlimit-layout-4"
	boundedLayout = "reqlimit-layout-5"
)

// Where the fields of a key's value are, in bytes: the layouts of exact.lua and
// bounded.lua, named here once and passed to every script that reads them.
const (
	exactHead   = 9  // [I2 w] [i7 E], then an [I2 b] per rate
	boundedHead = 17 // [I2 w] [i8 last] [i7 E]
	lastAt      = 3  // bounded.lua's last, from 1 (as Lua's struct.unpack counts)
	slots       = bounds.Buckets + 1
	blockLen    = (3 + slots) * 8 // a bounded rate's [i8 lo] [i8 sum] [i8 newest] [i8 counts x slots]
)

var errNilPolicy = errors.New("redisstore: query has no policy")

// Decide implements core.Store. It fails, wrapping the cause and naming the key, when
// Redis cannot answer within the timeout; the caller then applies its failure policy.
func (s *Store) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	p := q.Policy
	if p == nil {
		return core.Decision{}, errNilPolicy
	}
	cost := max(q.Cost, 1)
	pl := s.plan(p)
	for _, r := range pl.rates {
		if cost > r.Count {
			return core.Decision{}, fmt.Errorf("redisstore: cost %d, rate %v: %w", cost, r, core.ErrCostTooHigh)
		}
	}
	h := hashOf(pl.layout, p, q.Scope, q.Key)
	useDeny := s.deny != nil && q.Mode != core.Penalty
	start := s.now()
	if useDeny {
		if d, ok := s.deny.get(h, cost, start); ok {
			return d, nil
		}
	}
	var gen uint64
	if s.deny != nil {
		gen = s.deny.gen(h)
	}
	key := s.keyName(h)
	vals, err := s.run(ctx, pl.script, key, "", false, s.args(pl, cost, q.Mode))
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: decide %q for key %s: %w", p.String(), key, err)
	}
	d, wait, err := decision(pl.rates, vals)
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: decide %q for key %s: %w", p.String(), key, err)
	}
	if s.deny != nil && q.Mode != core.Peek {
		// A refusal is cached from the moment the request left, so the local refusal ends
		// no later than the server's would. A Penalty refusal is cached too: it reports
		// the state after recording, which is what an Enforce query would meet next.
		// Any admission on this key drops the entry. A refusal whose reply comes after a
		// reset or release of the key may predate it: it is not cached (see gen).
		if !d.Allowed && wait > 0 {
			s.deny.put(h, gen, cost, start, wait, d)
		} else if d.Allowed {
			s.deny.drop(h)
		}
	}
	return d, nil
}

// Reset implements core.Resetter: it deletes the bucket's key, which holds every rate's
// grants, in one script, so a decision on the key runs wholly before or after it. It runs
// under the store's deadline (WithTimeout), as decisions do. This process forgets its cached
// refusal of the key too; another process's cached refusal lasts until its wait ends, up to
// the period (stricter, never looser; WithDenyCache(false) in every process avoids it).
func (s *Store) Reset(ctx context.Context, q core.Query) error {
	if q.Policy == nil {
		return errNilPolicy
	}
	h := hashOf(s.plan(q.Policy).layout, q.Policy, q.Scope, q.Key)
	key := s.keyName(h)
	if s.deny != nil {
		s.deny.drop(h)
	}
	// Under the store's deadline, as a decision. A reset run twice (go-redis re-sends a call
	// or a pipeline whose reply was lost) is one at the later time: its fence never moves back.
	if _, err := s.run(ctx, resetScript, key, fenceName(key), false, s.resetArgs(q.Policy)); err != nil {
		return fmt.Errorf("redisstore: reset key %s: %w", key, err)
	}
	if s.deny != nil {
		s.deny.forget(h) // a refusal cached, or still on its way, while the DEL was under way
	}
	return nil
}

// Release implements core.Releaser: it gives back the grant a decision of q recorded at
// grant (Decision.Grant, the server's time in microseconds), in one script, so a decision on
// the key runs wholly before or after it. It runs at most once: an error may mean that the
// grant was given back or that it still counts, never that it came back twice. This process
// forgets its cached refusal of the key too; another process's cached refusal lasts until
// its wait ends (stricter, never looser).
func (s *Store) Release(ctx context.Context, q core.Query, grant int64) error {
	p := q.Policy
	if p == nil {
		return errNilPolicy
	}
	pl := s.plan(p)
	h := hashOf(pl.layout, p, q.Scope, q.Key)
	key := s.keyName(h)
	if s.deny != nil {
		s.deny.drop(h)
	}
	// once: a give-back run twice would give back a second grant (see txAll).
	if _, err := s.run(ctx, releaseScript, key, fenceName(key), true, []any{releaseArgs(pl, grant, max(q.Cost, 1))}); err != nil {
		return fmt.Errorf("redisstore: release %q grant %d for key %s: %w", p.String(), grant, key, err)
	}
	if s.deny != nil {
		s.deny.forget(h) // a refusal cached, or still on its way, while the release was under way
	}
	return nil
}

// fenceName is the key of key's reset fence (reset.lua), in key's hash slot.
func fenceName(key string) string { return key + ":reset" }

// resetArgs packs reset.lua's ARGV: whether to read the server's TIME, the time otherwise,
// and the fence's expiry: twice p's longest period, after which every grant the reset
// forgot is out of every window (under a test clock, no expiry, as for the keys); then the
// key's layout, as for a release.
func (s *Store) resetArgs(p *core.Policy) []any {
	useTime, now, expire := int64(1), int64(0), 2*longestMillis(p)
	if s.clock != nil {
		useTime, now, expire = 0, s.clock().UnixMicro(), 0
	}
	b := make([]byte, 0, 24)
	for _, x := range []int64{useTime, now, expire} {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return []any{b, releaseArgs(s.plan(p), 0, 1)}
}

// longestMillis is p's longest period in whole milliseconds, rounded up.
func longestMillis(p *core.Policy) int64 {
	var l time.Duration
	for _, r := range p.Rates() {
		l = max(l, r.Period)
	}
	return int64((l + time.Millisecond - 1) / time.Millisecond)
}

// releaseArgs packs release.lua's ARGV: the grant, its cost, then where the key's fields
// are (plan.fields).
func releaseArgs(pl *plan, grant int64, cost int) []byte {
	b := make([]byte, 0, 16+len(pl.fields))
	b = binary.LittleEndian.AppendUint64(b, uint64(grant))
	b = binary.LittleEndian.AppendUint64(b, uint64(cost))
	return append(b, pl.fields...)
}

// eval runs the script by its digest and sends its text when the server lacks it (after a
// restart, a failover or SCRIPT FLUSH). The check is ours rather than only go-redis's so
// that a NOSCRIPT with any "ERR " prefix a proxy adds is also caught.
func (s *Store) eval(ctx context.Context, script *redis.Script, keys []string, args []any) (reply, error) {
	cmd := script.EvalSha(ctx, s.client, keys, args...)
	if isNoScript(cmd.Err()) {
		cmd = script.Eval(ctx, s.client, keys, args...)
	}
	return replyOf(cmd)
}

// replyOf reads a script call's reply.
func replyOf(cmd *redis.Cmd) (reply, error) {
	text, err := cmd.Text()
	if err != nil {
		return reply{}, err
	}
	return unpackReply(text)
}

// replyLen is the number of int64s every script returns, packed little-endian in one string.
const replyLen = 8

// A reply is a script's answer, unpacked.
type reply [replyLen]int64

// unpackReply reads a script's reply.
func unpackReply(s string) (reply, error) {
	var v reply
	if len(s) != 8*replyLen {
		return v, fmt.Errorf("unexpected script reply of %d bytes %q, want %d", len(s), s, 8*replyLen)
	}
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64([]byte(s[8*i : 8*i+8]))) // 8 bytes: no allocation
	}
	return v, nil
}

func isNoScript(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, redis.ErrNoScript) {
		return true
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	return strings.HasPrefix(msg, "NOSCRIPT")
}

// args builds the script's ARGV: packed little-endian int64s. Binary rather than decimal text because converting strings to numbers is
// one of the dearest steps in Redis's Lua. The policy's part is built once per policy
// (see plan).
func (s *Store) args(pl *plan, cost int, mode core.Mode) []any {
	b := make([]byte, 40+len(pl.tail))
	useTime, now, expire := int64(1), int64(0), pl.expire
	if s.clock != nil {
		// Keys under a test clock get no expiry: its time is not the server's.
		useTime, now, expire = 0, s.clock().UnixMicro(), 0
	}
	binary.LittleEndian.PutUint64(b[0:], uint64(useTime))
	binary.LittleEndian.PutUint64(b[8:], uint64(now))
	binary.LittleEndian.PutUint64(b[16:], uint64(cost))
	binary.LittleEndian.PutUint64(b[24:], uint64(mode))
	binary.LittleEndian.PutUint64(b[32:], uint64(expire))
	copy(b[40:], pl.tail)
	return []any{b}
}

// A plan is a policy's part of the script's arguments, and the script that decides it.
type plan struct {
	// rates are the policy's, copied once: a decision reads them without a copy of its own.
	rates  []core.Rate
	script *redis.Script
	// expire is the fifth argument: for exact.lua the expiry after a grant in
	// milliseconds, the longest period rounded up; for bounded.lua 1 (keep an expiry).
	expire int64
	// tail is the rest: for exact.lua L, the number of rates, then count and period of
	// each; for bounded.lua L, the number of rates and of bounded ones, the buckets'
	// slots, the ring's first byte, then count, period and granule (0: exact) of each.
	tail   []byte
	layout string // the generation of the value's layout, part of every key's name
	// fields is where the value's fields are, for release.lua and reset.lua: L, the ring's
	// first byte, 1 if the ring has all L slots (bounded.lua's), the byte of the latest
	// decision's time (0: none), the buckets' slots, the number of bounded rates, then
	// each one's block's first byte and granule.
	fields []byte
}

// maxPlans bounds the per-policy cache; an application with more policies than this
// (built on the fly, say) still works, it only packs the arguments each time.
const maxPlans = 1024

// plan returns p's plan, cached.
func (s *Store) plan(p *core.Policy) *plan {
	if v, ok := s.plans.Load(p); ok {
		return v.(*plan)
	}
	rates := p.Rates()
	pl := newPlan(rates)
	pl.rates = rates
	if s.nplans.Add(1) <= maxPlans {
		s.plans.Store(p, pl)
	}
	return pl
}

// newPlan builds the plan of a policy of rates. Periods go in whole microseconds, rounded
// up: the server clock counts microseconds, and a longer window can only be stricter.
func newPlan(rates []core.Rate) *plan {
	logLen, longest := int64(0), int64(0)
	var grans []int64 // the bounded rates'
	for _, r := range rates {
		us := micros(r.Period)
		longest = max(longest, us)
		if exact(r) {
			logLen = max(logLen, int64(r.Count))
		} else {
			grans = append(grans, granuleOf(us))
		}
	}
	put := func(b []byte, xs ...int64) []byte {
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	if len(grans) == 0 {
		// The expiry after a grant is the longest period, in milliseconds rounded up.
		pl := &plan{script: exactScript, expire: max(1, (longest+999)/1000), layout: exactLayout}
		ring := int64(exactHead + 2*len(rates))
		pl.tail = put(nil, logLen, int64(len(rates)))
		for _, r := range rates {
			pl.tail = put(pl.tail, int64(r.Count), micros(r.Period))
		}
		pl.fields = put(nil, logLen, ring, 0, 0, slots, 0)
		return pl
	}
	ring := int64(boundedHead + blockLen*len(grans))
	pl := &plan{script: boundedScript, expire: 1, layout: boundedLayout}
	pl.tail = put(nil, logLen, int64(len(rates)), int64(len(grans)), slots, ring)
	for _, r := range rates {
		us, g := micros(r.Period), int64(0)
		if !exact(r) {
			g = granuleOf(us)
		}
		pl.tail = put(pl.tail, int64(r.Count), us, g)
	}
	pl.fields = put(nil, logLen, ring, 1, lastAt, slots, int64(len(grans)))
	for j, g := range grans {
		pl.fields = put(pl.fields, int64(boundedHead+blockLen*j), g)
	}
	return pl
}

// now is the deny cache's clock: the local monotonic clock, or the test clock if given.
func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// granuleOf is a bounded rate's bucket width for a period of us microseconds, as the
// engine's: the period over bounds.Buckets, rounded up.
func granuleOf(us int64) int64 { return (us + bounds.Buckets - 1) / bounds.Buckets }

// exact reports whether core keeps r as an exact log of grant times.
func exact(r core.Rate) bool { return r.Count <= bounds.LargestExact }

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// decision reads the script's reply: the decision and, for a refusal, the true wait until
// admission (see the deny cache).
func decision(rates []core.Rate, v reply) (core.Decision, time.Duration, error) {
	if v[1] < 0 || int(v[1]) >= len(rates) {
		return core.Decision{}, 0, fmt.Errorf("unexpected script reply %v", v)
	}
	return core.Decision{
		Allowed:    v[0] == 1,
		Rate:       rates[v[1]],
		Remaining:  int(v[2]),
		RetryAfter: time.Duration(v[3]) * time.Microsecond,
		Reset:      time.Duration(v[4]) * time.Microsecond,
		FullReset:  time.Duration(v[5]) * time.Microsecond,
		Grant:      v[7],
	}, time.Duration(v[6]) * time.Microsecond, nil
}
