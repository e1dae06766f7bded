package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decisions made at the same moment share round trips. Each server (each master, in a
// Cluster) has a queue and at most flights goroutines sending it: a call joins the queue,
// starting a flight if fewer are out, and a flight sends what waits, up to maxBatch script
// calls, as one pipeline, until the queue is empty. A caller stops waiting at its deadline.

// DefaultFlights is how many sends a Store keeps on the wire to each server at once unless
// WithFlights says otherwise.
const DefaultFlights = 4

// maxBatch bounds a pipeline, so that one flight's latency stays short.
const maxBatch = 128

// A call is one script call on its way through a queue.
type call struct {
	ctx    context.Context // the caller's, under the store's deadline; done once it gives up
	down   context.Context // its server's refusal signal when it was queued (see refused)
	script *redis.Script
	keys   []string
	args   []any
	v      reply
	err    error
	done   chan struct{} // receives once v and err are set
}

// A queue holds the calls waiting for one server's flights, and what is known of its
// connections. When a connection is refused, the calls under way are cut short (down),
// calls for the next pause fail unsent (shut), then one call at a time probes the server
// until one is answered.
type queue struct {
	mu      sync.Mutex
	waiting []*call
	flying  int
	// unreachable is the last failed connection attempt, until the server is reached.
	unreachable atomic.Pointer[dialFailure]
	// down is cancelled, with the dial's error as cause, at the next refused connection;
	// nil until a call asks for it (see signal), and again after each refusal.
	down       context.Context
	cancelDown context.CancelCauseFunc
	// probing is set while a call finds out whether a server that refused is back (shut).
	probing atomic.Bool
	// node is the Cluster node client whose dials report here; nil for a single server.
	node atomic.Pointer[redis.Client]
}

// A dialFailure is the error a connection attempt met, and when the host or network
// answered no at once (see isRefusal); zero for other failures, such as a timeout.
type dialFailure struct {
	err       error
	refusedAt time.Time
}

// refusedPause is how long after a refused connection calls fail unsent: go-redis would
// keep each until its deadline, dialing again and again and logging each failed round.
const refusedPause = time.Second

// signal returns q's refusal signal (q.down), made if there is none; q.mu is held.
func (q *queue) signal() context.Context {
	if q.down == nil {
		q.down, q.cancelDown = context.WithCancelCause(context.Background())
	}
	return q.down
}

// refused notes that a connection attempt was refused with err: calls fail at once for
// the pause, and those under way stop waiting rather than at their deadline (go-redis
// dials on a goroutine of its own and would keep them, then report only the deadline).
func (q *queue) refused(err error) {
	q.unreachable.Store(&dialFailure{err: err, refusedAt: time.Now()})
	q.mu.Lock()
	if q.down != nil {
		q.cancelDown(err)
		q.down = nil
	}
	q.mu.Unlock()
}

// isRefusal reports whether a dial's err says that nothing will answer at the address for
// now: connection refused, host or network unreachable, or a name that does not resolve.
func isRefusal(err error) bool {
	dns, ok := errors.AsType[*net.DNSError](err)
	return ok && dns.IsNotFound || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// shut returns the error a call fails with unsent: the server refused a connection less
// than pause ago, or another call is probing it. Otherwise the call is sent, and if the
// server had refused, it is the probe: the caller clears q.probing when it is back.
func (q *queue) shut(now time.Time, pause time.Duration) (probe bool, err error) {
	f := q.unreachable.Load()
	if f == nil || f.refusedAt.IsZero() {
		return false, nil
	}
	if now.Sub(f.refusedAt) < pause || !q.probing.CompareAndSwap(false, true) {
		return false, fmt.Errorf("%w (not sent: the server refused a connection %v ago)", f.err, now.Sub(f.refusedAt).Round(time.Millisecond))
	}
	return true, nil
}

// dialWatch is a go-redis hook that tells q how its server's connection attempts end.
// go-redis dials without the caller's context, so the outcome is the server's.
type dialWatch struct{ q *queue }

// DialHook notes each attempt's outcome and passes it on unchanged.
func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			w.q.unreachable.Store(nil)
		case isRefusal(err):
			w.q.refused(err)
		case !errors.Is(err, context.Canceled): // a cancelled dial says nothing of the server
			w.q.unreachable.Store(&dialFailure{err: err})
		}
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explain adds to a context error the connection's error: go-redis redials until the
// context is done and reports only the context's error, which reads as a slow Redis where
// Redis is unreachable. errors.Is still finds the context's error.
func (q *queue) explain(err error, budget time.Duration) error {
	late := errors.Is(err, context.DeadlineExceeded)
	_, own := errors.AsType[*net.OpError](err) // a network cause of its own
	if own || !late && !errors.Is(err, context.Canceled) {
		return err
	}
	if budget >= time.Millisecond {
		budget = budget.Round(time.Millisecond)
	}
	f := q.unreachable.Load()
	switch {
	case f == nil && late:
		// Named, so that a deadline too short for any answer (WithTimeout(100), meant as
		// milliseconds) reads as such, not as a slow Redis.
		return fmt.Errorf("no answer within the %v deadline (WithTimeout, or the caller's if earlier): %w", budget, err)
	case f == nil:
		return err
	case late:
		return fmt.Errorf("%w (gave up at the %v deadline: %w)", f.err, budget, err)
	}
	return fmt.Errorf("%w (gave up: %w)", f.err, err)
}

var doneCtx, _ = context.WithDeadline(context.Background(), time.Time{})

// queueFor returns the queue of the server that holds key: for a Cluster, its master's, so
// that a slow or dead master delays only the decisions it holds.
func (s *Store) queueFor(key string) *queue {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return &s.queue
	}
	// A done context: a loaded map answers at once, an unloaded one fails at once instead
	// of loading here, outside any deadline (the send loads it, within its own).
	node, err := cc.MasterForKey(doneCtx, key)
	if err != nil {
		return &s.queue // the send will meet the same error, and report it
	}
	// By address: go-redis replaces a node's client when the node leaves and comes back.
	// Looked up before offering a new queue, which would be allocated at every decision.
	addr := node.Options().Addr
	v, ok := s.nodes.Load(addr)
	if !ok {
		v, _ = s.nodes.LoadOrStore(addr, &queue{})
	}
	q := v.(*queue)
	// Each node client dials for itself, so each new one gets the hook, once.
	if old := q.node.Load(); old != node && q.node.CompareAndSwap(old, node) {
		node.AddHook(dialWatch{q})
	}
	return q
}

// run sends the script within the store's deadline (and ctx's, if earlier). keys[1], if
// any, is a second key the script reads, in keys[0]'s slot.
func (s *Store) run(ctx context.Context, script *redis.Script, keys []string, args []any) (reply, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	q := s.queueFor(keys[0])
	c := &call{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{}, 1)}
	// Under q.mu, a refusal comes before the signal is taken or after the call is queued.
	q.mu.Lock()
	c.down = q.signal()
	probe, err := q.shut(start, s.pause)
	if err != nil {
		q.mu.Unlock()
		return reply{}, err
	}
	// Whoever takes a flight (q.flying++) gives it back or hands it to a new fly.
	free := q.flying < s.flights
	// A caller that finds a flight free and nobody waiting sends its call itself, with no
	// goroutine to wake, if the client holds its deadline on the socket.
	self := free && s.direct && len(q.waiting) == 0
	if free {
		q.flying++
	}
	if !self {
		q.waiting = append(q.waiting, c)
	}
	q.mu.Unlock()
	if probe {
		defer q.probing.Store(false)
	}
	switch {
	case self:
		s.send(c.down, []*call{c})
		q.mu.Lock()
		if len(q.waiting) > 0 {
			go s.fly(q) // calls queued meanwhile: the flight goes on
		} else {
			q.flying--
		}
		q.mu.Unlock()
	case free:
		go s.fly(q)
	}
	var v reply
	select {
	case <-c.done:
		v, err = c.v, c.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.down.Done():
		err = context.Cause(c.down)
	}
	switch {
	case err == nil || errors.As(err, new(redis.Error)): // the server answered
		q.unreachable.Store(nil)
		return v, err
	case ctx.Err() == nil && c.down.Err() != nil:
		// Cut short by a refused connection: that is the cause, not the cut.
		return v, context.Cause(c.down)
	}
	if isRefusal(err) {
		// go-redis reports a refusal it saw earlier without dialing, once enough dials
		// failed: no hook saw this one.
		q.refused(err)
	}
	deadline, _ := ctx.Deadline()
	return v, q.explain(err, min(deadline.Sub(start), s.timeout))
}

// fly sends q's waiting calls, batch after batch, until none is left; its starter took
// one of q's flights, which fly gives back.
func (s *Store) fly(q *queue) {
	for {
		q.mu.Lock()
		n := min(len(q.waiting), maxBatch)
		if n == 0 {
			q.flying--
			q.mu.Unlock()
			return
		}
		batch := slices.Clone(q.waiting[:n])
		q.waiting = slices.Delete(q.waiting, 0, n)
		down := q.signal()
		q.mu.Unlock()
		s.send(down, batch)
	}
}

// waited reports whether c's caller still waits for it: a call is sent, or sent again,
// only then, or it could record a grant nobody receives.
func waited(c *call) bool { return c.ctx.Err() == nil && c.down.Err() == nil }

// send answers each call of batch, stopping at the refusal down. Calls whose callers have
// gone are not sent; the others go in one pipeline, with the latest of their deadlines, but
// releases in MULTI/EXEC beside it: go-redis may send a pipeline again after a failed read,
// though the server ran it, but a transaction only when its EXEC cannot have run.
func (s *Store) send(down context.Context, batch []*call) {
	var live []*call
	txs := map[string][]*call{}
	_, cluster := s.client.(*redis.ClusterClient)
	var deadline time.Time
	for _, c := range batch {
		if !waited(c) {
			c.err = cmp.Or(c.ctx.Err(), context.Cause(c.down))
			continue
		}
		if d, _ := c.ctx.Deadline(); d.After(deadline) {
			deadline = d
		}
		tag := "" // a Cluster's transaction holds one slot: one per key, whose hash is its tag
		if cluster {
			tag = c.keys[0]
		}
		if c.script == releaseScript {
			txs[tag] = append(txs[tag], c)
		} else {
			live = append(live, c)
		}
	}
	if !deadline.IsZero() {
		base := context.Background() // a pipeline serves several callers, so it has none's context
		if len(batch) == 1 {
			base = batch[0].ctx
		}
		ctx, cancel := context.WithDeadline(base, deadline)
		stop := context.AfterFunc(down, cancel)
		var wg sync.WaitGroup
		for _, tx := range txs {
			wg.Go(func() { s.answer(ctx, true, tx) })
		}
		s.answer(ctx, false, live)
		wg.Wait()
		stop()
		cancel()
	}
	for _, c := range batch {
		c.done <- struct{}{}
	}
}

// answer sends calls, in a transaction if tx, else in a pipeline or, alone, as a single
// command, and sends again after movingPause those refused for a moving slot (see moving).
func (s *Store) answer(ctx context.Context, tx bool, calls []*call) {
	for len(calls) > 0 {
		if len(calls) == 1 && !tx {
			c := calls[0]
			c.v, c.err = replyOf(c.script.Run(ctx, s.client, c.keys, c.args...))
		} else {
			s.exec(ctx, tx, calls)
		}
		if calls = moving(calls); len(calls) > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(movingPause):
			}
		}
	}
}

// exec runs the calls' scripts in a pipeline, or a transaction if tx, then, in a second,
// as EVAL, those whose script the server lacked (after a restart, a failover or SCRIPT
// FLUSH). A decision the server did not run (see notRun) is sent again alone.
func (s *Store) exec(ctx context.Context, tx bool, calls []*call) {
	pipe := s.client.Pipeline
	if tx {
		pipe = s.client.TxPipeline
	}
	cmds := make([]*redis.Cmd, len(calls))
	p := pipe()
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
	}
	p.Exec(ctx) // each command keeps its own error
	p = pipe()
	for i, c := range calls {
		if hasPrefix(cmds[i].Err(), "NOSCRIPT") && waited(c) {
			cmds[i] = c.script.Eval(ctx, p, c.keys, c.args...)
		}
	}
	p.Exec(ctx) // with nothing queued, sends nothing
	for i, c := range calls {
		if c.script != releaseScript && notRun(cmds[i].Err()) && waited(c) {
			cmds[i] = c.script.Run(ctx, s.client, c.keys, c.args...)
		}
		c.v, c.err = replyOf(cmds[i])
	}
}

// moving returns the calls whose callers still wait that a Cluster refused because their
// slot was moving between masters: TRYAGAIN while the slot's keys are on both (a release
// or a reset reads two), or a MOVED that outlasted go-redis's own redirections. They ran
// nothing, and the move ends soon.
func moving(calls []*call) []*call {
	var again []*call
	for _, c := range calls {
		if hasPrefix(c.err, "TRYAGAIN ", "MOVED ", "ASK ") && waited(c) {
			again = append(again, c)
		}
	}
	return again
}

// movingPause is how long a call refused for a moving slot waits to be sent again: long
// enough not to spin against the server, short beside a store's deadline.
const movingPause = 10 * time.Millisecond

// hasPrefix reports whether err's text, without any "ERR " prefix a proxy adds, starts
// with one of ps.
func hasPrefix(err error, ps ...string) bool {
	if err == nil {
		return false
	}
	text := strings.TrimPrefix(err.Error(), "ERR ")
	return slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(text, p) })
}

// notRun reports whether a server refused a command with err without running it, for a
// state that passes (a replica that was a master, a loading or failing-over server).
// go-redis retries these on a single command, but on a pipeline only when the first
// command met one, sending it all again: a grant recorded twice only makes the limit
// stricter, but a release run twice would be looser (see send).
func notRun(err error) bool {
	return hasPrefix(err, "READONLY ", "LOADING ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN ")
}
