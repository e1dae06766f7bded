package redisstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Decisions made at the same moment share round trips. While maxFlights script calls or
// pipelines are on the wire, a new decision waits in a queue; the next caller to send takes
// the whole queue (at most maxBatch calls) as one pipeline. Each decision is still its own
// script call, atomic on the server, answered in one round trip. Under load this saves a
// write, a read and a wake-up per decision on both sides, which is most of what a short
// script costs; alone, a decision goes out at once, as a single EVALSHA.
//
// There is no background goroutine: the caller that finds a flight free sends the queue
// itself, and when it is done hands the queue, if it has grown, to the oldest waiting
// caller. A client that ignores context deadlines on its sockets gets a goroutine per
// flight instead, so that no caller outlives its deadline waiting on a socket.

// DefaultFlights is the number of script calls or pipelines a Store keeps on the wire at
// once unless WithFlights says otherwise.
const DefaultFlights = 4

// maxBatch bounds a pipeline, so that one flight's latency stays short.
const maxBatch = 128

// A call is one script call on its way through the queue.
type call struct {
	ctx      context.Context
	script   *redis.Script
	key      string
	args     []any
	deadline time.Time
	v        reply
	err      error
	// lead is true, under the queue's lock, from when the queue is handed to the waiting
	// caller until that caller takes it up.
	lead bool
	// done gets true when the caller is handed the queue, false when v and err are set.
	// A call is handed the queue only while it waits in it and answered only after it has
	// left it, so the two signals come in that order and never more than one of each.
	done chan bool
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan bool, 2)} }}

var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// queue holds the calls waiting for a flight.
type queue struct {
	mu      sync.Mutex
	waiting []*call
	flying  int // flights on the wire, or handed to a waiting caller
}

// run sends the script within the store's deadline (and ctx's, if earlier), through the
// queue.
func (s *Store) run(ctx context.Context, script *redis.Script, key string, args []any) (reply, error) {
	c := calls.Get().(*call)
	c.ctx, c.script, c.key, c.args = ctx, script, key, args
	c.deadline = time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(c.deadline) {
		c.deadline = d
	}
	q := &s.queue
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	lead := q.flying < s.flights
	if lead {
		q.flying++
	}
	q.mu.Unlock()
	if lead {
		s.fly()
		select {
		case lead := <-c.done: // sent inline by this caller: no timer needed
			if !lead {
				return s.finish(c)
			}
			s.takeLead(c)
		default:
		}
	}
	return s.wait(ctx, c)
}

// wait returns c's reply, sending the queue whenever c is handed it.
func (s *Store) wait(ctx context.Context, c *call) (reply, error) {
	t := timers.Get().(*time.Timer)
	t.Reset(time.Until(c.deadline))
	defer func() { t.Stop(); timers.Put(t) }()
	for {
		select {
		case lead := <-c.done:
			if !lead {
				return s.finish(c)
			}
			s.takeLead(c)
		case <-t.C:
			return s.abandon(c, context.DeadlineExceeded)
		case <-ctx.Done():
			return s.abandon(c, ctx.Err())
		}
	}
}

// takeLead sends the queue, which was handed to c's caller.
func (s *Store) takeLead(c *call) {
	s.queue.mu.Lock()
	c.lead = false
	s.queue.mu.Unlock()
	s.fly()
}

// finish returns c's reply and c to the pool.
func (s *Store) finish(c *call) (reply, error) {
	v, err := c.v, c.err
	*c = call{done: c.done}
	calls.Put(c)
	return v, err
}

// abandon gives up on c for err. A call still queued leaves the queue and is never sent;
// one on the wire is left to its flight (and not pooled, since the flight will write to it).
// If the queue was handed to c, c's caller sends it first: a flight must not be lost.
func (s *Store) abandon(c *call, err error) (reply, error) {
	q := &s.queue
	q.mu.Lock()
	if c.lead {
		q.mu.Unlock()
		<-c.done // true: the lead comes before any answer
		s.takeLead(c)
		return reply{}, err
	}
	if i := slices.Index(q.waiting, c); i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
		q.mu.Unlock()
		*c = call{done: c.done}
		calls.Put(c)
		return reply{}, err
	}
	q.mu.Unlock()
	return reply{}, err
}

// fly sends the waiting calls; the caller holds a flight. A client that honours context
// deadlines is sent to inline, and the flight then passes to the oldest waiting caller
// if more calls came meanwhile; otherwise a goroutine sends until the queue is empty.
func (s *Store) fly() {
	if !s.guard {
		s.send(s.take())
		s.land(true)
		return
	}
	go func() {
		for {
			s.send(s.take())
			if !s.land(false) {
				return
			}
		}
	}()
}

// take removes up to maxBatch calls from the queue.
func (s *Store) take() []*call {
	q := &s.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.waiting), maxBatch)
	batch := slices.Clone(q.waiting[:n])
	rest := copy(q.waiting, q.waiting[n:])
	clear(q.waiting[rest:])
	q.waiting = q.waiting[:rest]
	return batch
}

// land ends a flight. If calls are waiting, handOff passes the flight to the oldest of
// them not already handed one; otherwise land reports whether the flight should go on.
func (s *Store) land(handOff bool) (goOn bool) {
	q := &s.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) > 0 {
		if !handOff {
			return true
		}
		for _, w := range q.waiting {
			if !w.lead {
				w.lead = true
				w.done <- true
				return false
			}
		}
	}
	q.flying--
	return false
}

// send runs a batch of calls and answers each; calls past their deadline are answered
// with a timeout and not sent.
func (s *Store) send(batch []*call) {
	now := time.Now()
	live := batch[:0:0]
	var deadline time.Time
	for _, c := range batch {
		if !now.Before(c.deadline) {
			c.err = context.DeadlineExceeded
			continue
		}
		live = append(live, c)
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	switch len(live) {
	case 0:
	case 1:
		// Alone, a call goes with its caller's context, values (a tracer's, say) and all.
		c := live[0]
		ctx, cancel := context.WithDeadline(c.ctx, c.deadline)
		c.v, c.err = s.eval(ctx, c.script, c.key, c.args)
		cancel()
	default:
		// A pipeline serves several callers: it has none's context, and the latest
		// deadline, since each caller stops waiting at its own.
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		s.evalAll(ctx, live)
		cancel()
	}
	for _, c := range batch {
		c.done <- false
	}
}

// evalAll runs each call's script in one pipeline, then the texts of those the server
// lacked in a second.
func (s *Store) evalAll(ctx context.Context, batch []*call) {
	cmds := make([]*redis.Cmd, len(batch))
	pipe := s.client.Pipeline()
	for i, c := range batch {
		cmds[i] = c.script.EvalSha(ctx, pipe, []string{c.key}, c.args...)
	}
	pipe.Exec(ctx) // each command keeps its own error
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = s.client.Pipeline()
		for _, i := range again {
			c := batch[i]
			cmds[i] = c.script.Eval(ctx, pipe, []string{c.key}, c.args...)
		}
		pipe.Exec(ctx)
	}
	for i, c := range batch {
		c.v, c.err = replyOf(cmds[i])
	}
}
