package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decisions made at the same moment share round trips. Each server (each master, in a
// Cluster) has a queue and at most flights sends on the wire. A decision that finds a
// flight free and the queue empty is sent at once, alone, with its caller's context (by
// the caller itself, if the client holds context deadlines on its sockets; otherwise by
// a goroutine, which the caller stops waiting for at its deadline). Otherwise it waits
// in the queue, and a flight goroutine sends the queue (at most maxBatch calls) as one
// pipeline, again and again until the queue is empty. Each decision is still its own
// script call, atomic on the server, answered in one round trip; the
// pipeline saves a write, a read and a wake-up per decision on both sides, which is most
// of what a short script costs.
//
// Callers never send for others: a caller waits for its own answer, its deadline or its
// context, whichever comes first, so a slow server or a slow pipeline never holds a
// caller past its deadline.

// DefaultFlights is the number of sends a Store keeps on the wire to each server at once
// unless WithFlights says otherwise.
const DefaultFlights = 4

// maxBatch bounds a pipeline, so that one flight's latency stays short.
const maxBatch = 128

// A call is one script call on its way through a queue.
type call struct {
	ctx      context.Context
	script   *redis.Script
	key      string
	fence    string // a second key, for release.lua: the key's reset fence
	once     bool   // must not run twice: sent in MULTI/EXEC (see txAll)
	args     []any
	deadline time.Time
	v        reply
	err      error
	done     chan struct{} // receives once v and err are set
	queued   bool          // in a queue's waiting list (under its lock)
	gone     bool          // abandoned while queued: the flight that takes it pools it
	down     *refusals     // its server's refusal signal, taken before it was sent
}

// doneCtx is a context already done.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// A queue holds the calls waiting for a flight to one server.
type queue struct {
	mu      sync.Mutex
	waiting []*call
	flying  int // sends on the wire
	// unreachable is the error of the last failed attempt to connect to the server, until
	// a connection or an answer comes (see explain and shut).
	unreachable atomic.Pointer[dialFailure]
	// signal is done at the next refused connection (see refusals); nil until a call
	// asks for it, and again after each refusal.
	signal atomic.Pointer[refusals]
	// probing is set while a call goes to a server that refused connections, to see
	// whether it is back (see shut).
	probing atomic.Bool
	// node is the Cluster node client whose dials report here; nil for a single server,
	// whose client reports to the store's own queue.
	node atomic.Pointer[redis.Client]
}

// A dialFailure is the error a connection attempt to a server met, and when. refused says
// that the server's host, or the network, answered no at once (see isRefusal): unlike a
// timeout, that ends every call waiting for a connection, and the next ones for a while.
type dialFailure struct {
	err     error
	at      time.Time
	refused bool
}

// refusedPause is how long after a refused connection a call fails without being sent,
// unless a connection or an answer comes first. go-redis would otherwise keep each call
// until its deadline, trying to connect again and again, and log each failed round; the
// pause lets one call a pause go to the server to find it back (see shut).
const refusedPause = time.Second

// refusals is a signal that a server refused a connection: ctx is cancelled, with the
// dial's error as cause, at the next refusal the store's hook sees. Calls on their way
// to the server stop waiting then rather than at their deadline: go-redis, which dials
// on a goroutine of its own and tries again after a pause, would keep them until the
// deadline and then report only the deadline.
type refusals struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// refusalSignal returns q's current signal, made if there is none.
func (q *queue) refusalSignal() *refusals {
	for {
		if r := q.signal.Load(); r != nil {
			return r
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		r := &refusals{ctx, cancel}
		if q.signal.CompareAndSwap(nil, r) {
			return r
		}
		cancel(nil)
	}
}

// refused notes that a connection attempt to q's server was refused with err: calls
// fail at once for refusedPause, and those under way stop waiting.
func (q *queue) refused(err error) {
	q.unreachable.Store(&dialFailure{err: err, at: time.Now(), refused: true})
	if r := q.signal.Swap(nil); r != nil {
		r.cancel(err)
	}
}

// isRefusal reports whether a dial's err says that nothing will answer at the address for
// now: the host refused the connection (no server listens), the host or network is
// unreachable, or the name does not resolve. Each comes at once, and the next attempt
// would meet the same.
func isRefusal(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	dns, ok := errors.AsType[*net.DNSError](err)
	return ok && dns.IsNotFound
}

// shut returns the error a call to q's server fails with at once, or nil to send it: a
// server that refused a connection less than pause ago, or while another call probes it,
// is not tried. Otherwise the call is sent, and when the server had refused, it is the
// probe, and probe is set: the caller clears q.probing when it is back.
func (q *queue) shut(now time.Time, pause time.Duration) (probe bool, err error) {
	f := q.unreachable.Load()
	if f == nil || !f.refused {
		return false, nil
	}
	if now.Sub(f.at) < pause || !q.probing.CompareAndSwap(false, true) {
		return false, fmt.Errorf("%w (not sent: the server refused a connection %v ago)", f.err, now.Sub(f.at).Round(time.Millisecond))
	}
	return true, nil
}

// dialWatch is a go-redis hook that tells q how its server's connection attempts end.
// go-redis dials on a goroutine of its own, without the caller's context, so the outcome
// is the server's, not a call's.
type dialWatch struct{ q *queue }

// DialHook notes each attempt's outcome and passes it on unchanged.
func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		switch {
		case err == nil:
			w.q.reached()
		case isRefusal(err):
			w.q.refused(err)
		case !errors.Is(err, context.Canceled):
			// A cancelled dial says nothing about the server.
			w.q.unreachable.Store(&dialFailure{err: err, at: time.Now()})
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

// reached forgets a failed connection attempt once the server has been reached. The load
// first keeps the common case, nothing to forget, a read of a shared line.
func (q *queue) reached() {
	if q.unreachable.Load() != nil {
		q.unreachable.Store(nil)
	}
}

// explain adds to a context error the cause the client did not report: go-redis retries a
// failed connection until the context is done and then returns only the context's error,
// so an operator would read "deadline exceeded" where Redis is unreachable. The failed attempt
// counts only while nothing has reached the server since; an error with a network cause
// of its own is left as it is. Both errors stay in the chain, so errors.Is still finds
// the context's.
func (q *queue) explain(err error, budget time.Duration) error {
	f := q.unreachable.Load()
	if f == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return err
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if budget >= time.Millisecond {
			budget = budget.Round(time.Millisecond)
		}
		return fmt.Errorf("%w (gave up at the %v deadline: %w)", f.err, budget, err)
	}
	return fmt.Errorf("%w (gave up: %w)", f.err, err)
}

// queueFor returns the queue of the server that holds key: the store's own for a single
// server, the master's for a Cluster, so that a slow or dead master delays only the
// decisions it holds.
func (s *Store) queueFor(key string) *queue {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return &s.queue
	}
	// A done context: a loaded state answers at once, an unloaded one fails at once
	// instead of loading here, outside any deadline (the send loads it, within its own).
	node, err := cc.MasterForKey(doneCtx, key)
	if err != nil {
		return &s.queue // the send will meet the same error, and report it
	}
	// By address: go-redis replaces a node's client when the node leaves and comes back,
	// and the server is the same one.
	addr := node.Options().Addr
	v, ok := s.nodes.Load(addr)
	if !ok {
		v, _ = s.nodes.LoadOrStore(addr, &queue{})
	}
	q := v.(*queue)
	// Each node client dials for itself, so each new one gets the hook (only the first
	// of several callers to see it adds it).
	if old := q.node.Load(); old != node && q.node.CompareAndSwap(old, node) {
		node.AddHook(dialWatch{q})
	}
	return q
}

// run sends the script within the store's deadline (and ctx's, if earlier). fence, if not
// "", is a second key the script reads, in key's slot. A call that is once must not run
// twice (see txAll).
func (s *Store) run(ctx context.Context, script *redis.Script, key, fence string, once bool, args []any) (reply, error) {
	c := calls.Get().(*call)
	c.ctx, c.script, c.key, c.fence, c.once, c.args = ctx, script, key, fence, once, args
	now := time.Now()
	budget := s.timeout
	c.deadline = now.Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Before(c.deadline) {
		c.deadline, budget = d, d.Sub(now)
	}
	q := s.queueFor(key)
	// The signal is taken before the server's state is read: a refusal after the read
	// ends the call through it.
	down := q.refusalSignal()
	probe, err := q.shut(now, s.pause)
	if err != nil {
		recycle(c)
		return reply{}, err
	}
	if probe {
		defer q.probing.Store(false)
	}
	c.down = down
	deadline := c.deadline
	v, err := s.runOn(q, c)
	switch {
	case err == nil || isReply(err):
		q.reached()
		return v, err
	case ctx.Err() == nil && time.Now().Before(deadline) && down.ctx.Err() != nil:
		// Cut short by a refused connection: that is the cause, not the cut.
		return v, context.Cause(down.ctx)
	}
	if isRefusal(err) {
		// go-redis reports a refusal it saw earlier without dialing, once enough dials
		// failed: no hook saw this one.
		q.refused(err)
	}
	return v, q.explain(err, budget)
}

// isReply reports whether err is an error the server answered with.
func isReply(err error) bool {
	_, ok := errors.AsType[redis.Error](err)
	return ok
}

// runOn sends c through q, or alone at once when a flight is free.
func (s *Store) runOn(q *queue, c *call) (reply, error) {
	q.mu.Lock()
	if q.flying >= s.flights {
		c.queued = true
		q.waiting = append(q.waiting, c)
		q.mu.Unlock()
		return s.wait(q, c)
	}
	q.flying++
	if len(q.waiting) > 0 || s.guard {
		// Calls are waiting (a flight is landing), or the client would not hold our
		// deadline on its socket: a flight goroutine sends, and c waits like the rest.
		c.queued = true
		q.waiting = append(q.waiting, c)
		q.mu.Unlock()
		go s.fly(q)
		return s.wait(q, c)
	}
	q.mu.Unlock()
	s.alone(c)
	if s.land(q) {
		go s.fly(q)
	}
	return s.finish(c)
}

// wait returns c's answer, or gives up on it at its deadline or when ctx is done.
func (s *Store) wait(q *queue, c *call) (reply, error) {
	t := timers.Get().(*time.Timer)
	t.Reset(time.Until(c.deadline))
	defer func() { t.Stop(); timers.Put(t) }()
	select {
	case <-c.done:
		return s.finish(c)
	case <-t.C:
		return s.abandon(q, c, context.DeadlineExceeded)
	case <-c.ctx.Done():
		return s.abandon(q, c, c.ctx.Err())
	case <-c.down.ctx.Done():
		return s.abandon(q, c, context.Cause(c.down.ctx))
	}
}

// finish returns c's answer, and c to the pool.
func (s *Store) finish(c *call) (reply, error) {
	v, err := c.v, c.err
	recycle(c)
	return v, err
}

// recycle returns c, which no flight will touch again, to the pool.
func recycle(c *call) {
	*c = call{done: c.done}
	calls.Put(c)
}

// abandon gives up on c for err. A call still queued is marked gone, and the flight that
// takes it from the queue drops it unsent and pools it (removing it here would cost a scan
// of the queue per caller when a stall makes them all give up at once); a call on the
// wire is left to its flight, and not pooled, since the flight will answer it.
func (s *Store) abandon(q *queue, c *call, err error) (reply, error) {
	q.mu.Lock()
	if c.queued {
		c.gone = true
	}
	q.mu.Unlock()
	return reply{}, err
}

// fly sends q's waiting calls, batch after batch, until none is left; its caller holds
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
		batch := make([]*call, 0, n)
		for _, c := range q.waiting[:n] {
			c.queued = false
			if c.gone {
				recycle(c)
				continue
			}
			batch = append(batch, c)
		}
		rest := copy(q.waiting, q.waiting[n:])
		clear(q.waiting[rest:])
		q.waiting = q.waiting[:rest]
		q.mu.Unlock()
		s.send(q, batch)
	}
}

// land ends a lone call's flight, or reports that calls are waiting and the flight should
// go on (as a flight goroutine).
func (s *Store) land(q *queue) (goOn bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) > 0 {
		return true
	}
	q.flying--
	return false
}

// alone sends c by itself, under its context and deadline, until its server refuses a
// connection: a call that is once in MULTI/EXEC, any other as a single script call.
func (s *Store) alone(c *call) {
	ctx, cancel := context.WithDeadline(c.ctx, c.deadline)
	stop := context.AfterFunc(c.down.ctx, cancel)
	if c.once {
		s.txAll(ctx, []*call{c})
	} else {
		c.v, c.err = s.eval(ctx, c.script, c.keys(), c.args)
	}
	stop()
	cancel()
}

// evalOnceAll runs calls that must not run twice, each at most once, in as few
// transactions as the client allows: one on a single server; on a Cluster, whose
// transactions hold keys of one slot, one per hash tag, side by side.
func (s *Store) evalOnceAll(ctx context.Context, calls []*call) {
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		s.txAll(ctx, calls)
		return
	}
	byTag := map[string][]*call{}
	for _, c := range calls {
		tag := hashTag(c.key)
		byTag[tag] = append(byTag[tag], c)
	}
	var wg sync.WaitGroup
	for _, tx := range byTag {
		wg.Go(func() { s.txAll(ctx, tx) })
	}
	wg.Wait()
}

// hashTag returns the part of key that Redis Cluster hashes to find its slot: between
// the first '{' and the next '}', if not empty, else all of it.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// txAll runs calls in one MULTI/EXEC, so that each runs at most once. go-redis sends a
// single command, or a pipeline, again when its connection fails after the write (io.EOF,
// a timeout), although the server may have run it; a transaction it sends again only
// when its EXEC cannot have run: the write failed (the EXEC never arrived whole), or EXEC
// was refused (a Cluster's MOVED, ASK, TRYAGAIN or CLUSTERDOWN, which discard the
// transaction). A reply that fails after the write ends the calls with an error, whether
// or not the server ran them. A script the server lacks fails at EXEC without running
// (NOSCRIPT) while the others run, so those calls go again as EVAL in a second one.
func (s *Store) txAll(ctx context.Context, calls []*call) {
	cmds := scripts(ctx, s.client.TxPipeline, calls)
	for i, c := range calls {
		c.v, c.err = replyOf(cmds[i])
	}
}

// scripts runs each call's script in a pipeline that pipe makes (a plain one, or a
// transaction), then, in a second, as EVAL, those whose script the server lacked, if
// their callers still wait.
func scripts(ctx context.Context, pipe func() redis.Pipeliner, calls []*call) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	p := pipe()
	for i, c := range calls {
		cmds[i] = c.script.EvalSha(ctx, p, c.keys(), c.args...)
	}
	p.Exec(ctx) // each command keeps its own error
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) && waited(calls[i]) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		p = pipe()
		for _, i := range again {
			cmds[i] = calls[i].script.Eval(ctx, p, calls[i].keys(), calls[i].args...)
		}
		p.Exec(ctx)
	}
	return cmds
}

// send runs a batch to q's server and answers each call. A call whose deadline has passed
// or whose context is done, or whose server refused a connection since it came, is
// answered with that error and not sent. Calls that are once
// never join the pipeline (go-redis may send a pipeline twice): they go in transactions
// of their own (see evalOnceAll), beside it. A refused connection ends the sends.
func (s *Store) send(q *queue, batch []*call) {
	now := time.Now()
	live := batch[:0:0]
	var once []*call
	var deadline, onceDeadline time.Time
	for _, c := range batch {
		if !now.Before(c.deadline) {
			c.err = context.DeadlineExceeded
		} else if err := c.ctx.Err(); err != nil {
			c.err = err
		} else if c.down.ctx.Err() != nil {
			c.err = context.Cause(c.down.ctx) // its caller has gone: the server refused
		} else if c.once {
			once = append(once, c)
			if c.deadline.After(onceDeadline) {
				onceDeadline = c.deadline
			}
		} else {
			live = append(live, c)
			if c.deadline.After(deadline) {
				deadline = c.deadline
			}
		}
	}
	var sent sync.WaitGroup
	switch len(once) {
	case 0:
	case 1:
		sent.Go(func() { s.alone(once[0]) })
	default:
		sent.Go(func() {
			ctx, cancel := context.WithDeadline(context.Background(), onceDeadline)
			stop := context.AfterFunc(q.refusalSignal().ctx, cancel)
			s.evalOnceAll(ctx, once)
			stop()
			cancel()
		})
	}
	switch len(live) {
	case 0:
	case 1:
		s.alone(live[0])
	default:
		// A pipeline serves several callers, so it has none's context (its values, a
		// tracer's say, or its cancellation), and the latest deadline: each caller stops
		// waiting at its own.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		stop := context.AfterFunc(q.refusalSignal().ctx, cancel)
		s.evalAll(ctx, live)
		stop()
		cancel()
	}
	sent.Wait()
	for _, c := range batch {
		c.done <- struct{}{}
	}
}

// evalAll runs each call's script in one pipeline. Calls the server did not run are sent
// again: those it lacked the script for, as EVAL in a second pipeline, and those refused
// for a passing state (a replica that was a master, a loading or failing-over server),
// alone, where go-redis retries them as it would any single command.
func (s *Store) evalAll(ctx context.Context, batch []*call) {
	cmds := scripts(ctx, s.client.Pipeline, batch)
	for i, c := range batch {
		if notRun(cmds[i].Err()) && waited(c) {
			c.v, c.err = s.eval(ctx, c.script, c.keys(), c.args)
			continue
		}
		c.v, c.err = replyOf(cmds[i])
	}
}

// waited reports whether c's caller may still be waiting for it: a call is sent again only
// then, or it could record a grant nobody receives.
func waited(c *call) bool { return time.Now().Before(c.deadline) && c.ctx.Err() == nil }

// notRun reports whether err is one with which a server refuses a command without running
// it, for a state that passes: go-redis retries these on a single command, but on a
// pipeline only when the first command met one, and then it sends the whole pipeline
// again, so that the other calls in it may run twice. That records a grant twice, which
// can only make the limit stricter; it needs the server's state to change within one
// pipeline (a load finishing between two of its reads). A release run twice would be
// looser: releases never join a pipeline (see txAll).
func notRun(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	for _, p := range [...]string{"READONLY ", "LOADING ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// keys is the call's KEYS.
func (c *call) keys() []string {
	if c.fence == "" {
		return []string{c.key}
	}
	return []string{c.key, c.fence}
}
