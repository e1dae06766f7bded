// Package redisstore is a core.Store kept in Redis, so that every process enforcing a limit
// shares it: strict sliding windows, decided and recorded by one Lua script in one round
// trip, on the Redis server's clock.
//
// It works with any redis.UniversalClient: a single node, a Sentinel failover client or a
// Cluster client. Each decision touches one key, prefix + "{" + hash + "}", so a Cluster
// routes it by the hash alone. exact.lua and bounded.lua describe the scripts and layouts.
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

// The scripts: exact.lua decides the policies whose rates are all exact, bounded.lua those
// with a bounded rate; release.lua and reset.lua serve both layouts (see plan.fields).
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
// keeps no goroutine between decisions, so there is nothing to close.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	clock   func() time.Time
	deny    *denyCache
	flights int
	direct  bool          // the client holds context deadlines on its sockets (see run)
	pause   time.Duration // refusedPause; tests shorten or lengthen it
	queue   queue         // a single server's (see batch.go)
	nodes   sync.Map      // a Cluster master's address -> its *queue
	// plans holds each policy's plan, so that a refusal from the deny cache allocates
	// nothing; at most maxPlans, so that policies built on the fly cost only the building.
	plans  sync.Map
	nplans atomic.Int64
}

const maxPlans = 1024

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
// arrive while all are out leave together, as one pipeline, on the next flight; a decision
// that finds a flight free and none waiting is sent by its own caller, where the client
// applies context deadlines to its sockets (ContextTimeoutEnabled).
func WithFlights(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.flights = n
		}
	}
}

// WithDenyCache turns the local deny cache on (the default) or off. While Redis has said a
// key is refused for the next R, Enforce and Peek queries of the same cost are refused
// locally, with RetryAfter, Reset and FullReset counting down, as Redis would (for a cost
// above 1, Remaining stays the value at the refusal). A Reset or Release reaches only its
// own process's cache: another keeps refusing the key until its cached wait ends, up to
// the period, so turn the cache off in every process where a Reset must free a key
// everywhere at once. Penalty queries always go to Redis, which must record each refusal.
// The cache holds at most 65,536 keys.
func WithDenyCache(on bool) Option {
	return func(s *Store) {
		s.deny = nil
		if on {
			s.deny = newDenyCache(defaultDenyCap)
		}
	}
}

// WithClock makes the scripts take their time from now, not from the Redis server. It is
// FOR TESTS AND SIMULATIONS ONLY: processes with their own clocks would disagree about
// windows. Keys written under a clock get no expiry, since its time is not the server's;
// use a throwaway database.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.clock = now } }

// New returns a Store that keeps its keys through client; it panics if client is nil.
//
// New adds a hook to client (for a Cluster, to each master's client) that notes how
// connection attempts end, so that a decision made while Redis is unreachable names the
// connection's error rather than only the deadline. When a connection is refused, the
// decisions waiting for the server fail at once, and for the next second decisions fail
// unsent; then one at a time is sent to find the server back. See docs/redis.md for
// routing go-redis's own log lines.
func New(client redis.UniversalClient, opts ...Option) *Store {
	// Refused here rather than by a nil dereference in the first decision, which a fail
	// mode would not see.
	if v := reflect.ValueOf(client); client == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		panic(fmt.Sprintf("redisstore.New: the client is nil (%T): create it with redis.NewClient, NewFailoverClient or NewClusterClient", client))
	}
	s := &Store{
		client:  client,
		prefix:  DefaultPrefix,
		timeout: DefaultTimeout,
		deny:    newDenyCache(defaultDenyCap),
		flights: DefaultFlights,
		pause:   refusedPause,
	}
	switch c := client.(type) {
	case *redis.Client:
		s.direct = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		s.direct = c.Options().ContextTimeoutEnabled
	}
	for _, o := range opts {
		if o != nil { // as a nil core.Option is to a limit: no option
			o(s)
		}
	}
	if _, ok := client.(*redis.ClusterClient); !ok {
		// A Cluster client's own hooks never see a dial: its nodes' clients dial.
		client.AddHook(dialWatch{&s.queue})
	}
	return s
}

// Key returns the Redis key that holds the state of (policy, scope, key), for operators
// and tests: prefix + "{" + 32 hex digits of a SHA-256 of the layout generation, policy
// text, scope and key, the same in every process. scope is the one a limit decides in:
// its WithScope name, or its route with an ident (see "Sharing one Redis" in docs/redis.md).
func (s *Store) Key(p *core.Policy, scope, key string) string {
	_, h, _ := s.bucket(core.Query{Policy: p, Scope: scope, Key: key})
	return s.keyName(h)
}

// bucket returns q's plan and its key's hash: SHA-256, since every process must derive the
// same key, of length-prefixed fields, which keep ("/a", "b") and ("/ab", "") apart.
func (s *Store) bucket(q core.Query) (*plan, [16]byte, error) {
	if q.Policy == nil {
		return nil, [16]byte{}, errors.New("redisstore: query has no policy")
	}
	if s.client == nil { // else it would fail on its zero deadline, which reads as a slow Redis
		return nil, [16]byte{}, errors.New("redisstore: the Store was not made by redisstore.New")
	}
	pl, ok := s.plans.Load(q.Policy)
	if !ok {
		pl = planOf(q.Policy)
		if s.nplans.Add(1) <= maxPlans {
			s.plans.Store(q.Policy, pl)
		}
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range [...]string{pl.(*plan).layout, q.Policy.String(), q.Scope, q.Key} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		h.Write([]byte(f))
	}
	var sum [sha256.Size]byte
	return pl.(*plan), [16]byte(h.Sum(sum[:0])), nil
}

func (s *Store) keyName(h [16]byte) string { return s.prefix + "{" + hex.EncodeToString(h[:]) + "}" }

// The generations of the scripts' value layouts, part of every key: a release that
// changes a layout changes its generation, so that its scripts never misread a value an
// older release wrote (a misread ring could admit a request too many); see docs/redis.md.
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

// Decide implements core.Store. It fails, wrapping the cause and naming the key, when
// Redis cannot answer within the timeout; the caller then applies its failure policy.
func (s *Store) Decide(ctx context.Context, q core.Query) (core.Decision, error) {
	pl, h, err := s.bucket(q)
	if err != nil {
		return core.Decision{}, err
	}
	cost := max(q.Cost, 1)
	for _, r := range pl.rates {
		if cost > r.Count {
			return core.Decision{}, fmt.Errorf("redisstore: cost %d, rate %v: %w", cost, r, core.ErrCostTooHigh)
		}
	}
	start := time.Now() // the deny cache's clock
	if s.clock != nil {
		start = s.clock()
	}
	var gen uint64
	if s.deny != nil {
		if q.Mode != core.Penalty { // which Redis must record
			if d, ok := s.deny.get(h, cost, start); ok {
				return d, nil
			}
		}
		gen = s.deny.gen(h).Load()
	}
	key := s.keyName(h)
	v, err := s.run(ctx, pl.script, []string{key}, s.args(pl, cost, q.Mode))
	if err == nil && (v[1] < 0 || int(v[1]) >= len(pl.rates)) {
		err = fmt.Errorf("unexpected script reply %v", v)
	}
	if err != nil {
		return core.Decision{}, fmt.Errorf("redisstore: decide %q for key %s: %w", q.Policy.String(), key, err)
	}
	us := func(i int) time.Duration { return time.Duration(v[i]) * time.Microsecond }
	d := core.Decision{
		Allowed: v[0] == 1, Rate: pl.rates[v[1]], Remaining: int(v[2]), Grant: v[7],
		RetryAfter: us(3), Reset: us(4), FullReset: us(5),
	}
	wait := us(6) // for a refusal, the true wait until admission
	if s.deny != nil && q.Mode != core.Peek {
		// Cached from the moment the request left, so that it ends no later than the
		// server's. A Penalty refusal reports the state after recording, which an Enforce
		// query meets next.
		if !d.Allowed && wait > 0 {
			s.deny.put(h, gen, cost, start, wait, d)
		} else if d.Allowed {
			s.deny.drop(h)
		}
	}
	return d, nil
}

// Reset implements core.Resetter: it deletes the bucket's key in one script, so a decision
// on the key runs wholly before or after it, under the store's deadline. Only this
// process's deny cache forgets the key (see WithDenyCache).
func (s *Store) Reset(ctx context.Context, q core.Query) error {
	pl, h, err := s.bucket(q)
	if err != nil {
		return err
	}
	key := s.keyName(h)
	// A reset run twice (go-redis re-sends a call or a pipeline whose reply was lost) is
	// one at the later time: its fence never moves back.
	b := put(nil, 1, 0, 2*pl.ttl)
	if s.clock != nil {
		b = put(nil, 0, s.clock().UnixMicro(), 0) // no expiry, as for the keys
	}
	if err := s.change(ctx, h, key, resetScript, b, releaseArgs(pl, 0, 1)); err != nil {
		return fmt.Errorf("redisstore: reset key %s: %w", key, err)
	}
	return nil
}

// Release implements core.Releaser: it gives back the grant a decision of q recorded at
// grant (Decision.Grant), in one script, under the store's deadline. It runs at most once:
// an error may mean that the grant was given back or that it still counts, never that it
// came back twice. Only this process's deny cache forgets the key (see WithDenyCache).
func (s *Store) Release(ctx context.Context, q core.Query, grant int64) error {
	pl, h, err := s.bucket(q)
	if err != nil {
		return err
	}
	key := s.keyName(h)
	if err := s.change(ctx, h, key, releaseScript, releaseArgs(pl, grant, max(q.Cost, 1))); err != nil {
		return fmt.Errorf("redisstore: release %q grant %d for key %s: %w", q.Policy.String(), grant, key, err)
	}
	return nil
}

// change runs a release or a reset of key, whose hash is h, and forgets this process's
// cached refusals of it: one cached before, and one on its way while the script ran.
func (s *Store) change(ctx context.Context, h [16]byte, key string, script *redis.Script, args ...any) error {
	if s.deny != nil {
		s.deny.drop(h)
	}
	// The second key is the key's reset fence (reset.lua), in its hash slot.
	if _, err := s.run(ctx, script, []string{key, key + ":reset"}, args); err != nil {
		return err
	}
	if s.deny != nil {
		s.deny.forget(h)
	}
	return nil
}

// put appends xs to b as little-endian int64s: the scripts read packed arguments, cheaper
// in Redis's Lua than numbers as text.
func put(b []byte, xs ...int64) []byte {
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// args packs a decision script's ARGV: whether to read the server's TIME, the time
// otherwise, cost, mode, expiry, then the policy's part (plan.tail).
func (s *Store) args(pl *plan, cost int, mode core.Mode) []any {
	b := put(make([]byte, 0, 40+len(pl.tail)), 1, 0, int64(cost), int64(mode), pl.expire)
	if s.clock != nil { // no expiry (see WithClock)
		b = put(b[:0], 0, s.clock().UnixMicro(), int64(cost), int64(mode), 0)
	}
	return []any{append(b, pl.tail...)}
}

// releaseArgs packs release.lua's ARGV: the grant, its cost, then plan.fields.
func releaseArgs(pl *plan, grant int64, cost int) []byte {
	return append(put(nil, grant, int64(cost)), pl.fields...)
}

// A reply is a script's answer: eight int64s, packed little-endian in one string.
type reply [8]int64

func replyOf(cmd *redis.Cmd) (reply, error) {
	var v reply
	text, err := cmd.Text()
	if err != nil {
		return v, err
	}
	if len(text) != 8*len(v) {
		return v, fmt.Errorf("unexpected script reply of %d bytes %q, want %d", len(text), text, 8*len(v))
	}
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64([]byte(text[8*i : 8*i+8])))
	}
	return v, nil
}

// A plan is a policy's part of the scripts' arguments, and the script that decides it.
type plan struct {
	rates  []core.Rate
	script *redis.Script
	layout string // the generation of the value's layout, part of every key's name
	ttl    int64  // the longest period in milliseconds, rounded up
	expire int64  // the decision's fifth argument: exact.lua's ttl; bounded.lua's 1 (keep one)
	tail   []byte // the rest of its arguments (the scripts say which)
	fields []byte // where the value's fields are, for release.lua and reset.lua
}

// planOf builds p's plan. Periods go in whole microseconds, rounded up: the server clock
// counts microseconds, and a longer window can only be stricter.
func planOf(p *core.Policy) *plan {
	pl := &plan{rates: p.Rates()}
	var logLen, longest, longestExact int64
	// Each rate's bucket width, as the engine's: the period over bounds.Buckets, rounded
	// up; 0 for a rate core keeps as an exact log of grant times.
	gran := make([]int64, len(pl.rates))
	var grans []int64 // the bounded rates'
	for i, r := range pl.rates {
		longest = max(longest, micros(r.Period))
		if r.Count <= bounds.LargestExact {
			logLen = max(logLen, int64(r.Count))
			longestExact = max(longestExact, micros(r.Period))
		} else {
			gran[i] = (micros(r.Period) + bounds.Buckets - 1) / bounds.Buckets
			grans = append(grans, gran[i])
		}
	}
	pl.ttl = (longest + 999) / 1000
	n := int64(len(pl.rates))
	if len(grans) == 0 {
		pl.script, pl.layout, pl.expire = exactScript, exactLayout, pl.ttl
		pl.tail = put(nil, logLen, n)
		for _, r := range pl.rates {
			pl.tail = put(pl.tail, int64(r.Count), micros(r.Period))
		}
		// release.lua's ARGV: L, RING, fixed, LAST, NB, nb, {block, granule} per bounded
		// rate (none here), then the longest exact period.
		pl.fields = put(nil, logLen, exactHead+2*n, 0, 0, slots, 0, longestExact)
		return pl
	}
	ring := int64(boundedHead + blockLen*len(grans))
	pl.script, pl.layout, pl.expire = boundedScript, boundedLayout, 1
	pl.tail = put(nil, logLen, n, int64(len(grans)), slots, ring)
	for i, r := range pl.rates {
		pl.tail = put(pl.tail, int64(r.Count), micros(r.Period), gran[i])
	}
	pl.fields = put(nil, logLen, ring, 1, lastAt, slots, int64(len(grans)))
	for j, g := range grans {
		pl.fields = put(pl.fields, int64(boundedHead+blockLen*j), g)
	}
	pl.fields = put(pl.fields, longestExact)
	return pl
}

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }
