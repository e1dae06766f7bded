// Package promlimit records the decisions of reqlimit's limits as Prometheus metrics, with
// one option that works with every adapter. Read New for what it registers, Example for a
// net/http app that serves them on /metrics, and docs/metrics.md for the names, labels and
// cardinality promise in full:
//
//	m := promlimit.New(nil) // on prometheus.DefaultRegisterer
//	r.GET("/user/test", ginlimit.Limit(3, time.Minute, m.Option()), h)
//	mux.Handle("GET /search", nethttp.Limit(500, 2*time.Second, m.Option())(h))
//
// Labels never carry the client key or IP: a series is a scope (the route pattern, or a
// core.WithScope name), a policy ("3/1m") and an outcome, so their number is bounded by
// the limits an application registers, not by its clients. Recording a decision allocates
// nothing once its series exists.
package promlimit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/metrics"
)

// unrouted is the scope label of decisions made where the route was not known: by a limit
// mounted before routing, or for a request that matched no route (core.Event.Scope "").
const unrouted = "unrouted"

// Metrics records limits' decisions in one set of collectors: reqlimit_requests_total
// {scope, policy, outcome}, reqlimit_store_errors_total{kind} and
// reqlimit_store_duration_seconds. The scope is "unrouted" for decisions made where the
// route was not known. One Metrics serves any number of limits; it is safe for concurrent
// use.
type Metrics struct {
	requests *prometheus.CounterVec
	errors   [numKinds]prometheus.Counter
	duration prometheus.Histogram

	// series maps a (scope, policy) to its counters. It is copied on write, so the
	// decisions of every limit read it without a lock; it grows once per new pair.
	series atomic.Pointer[map[seriesKey]*series]
	mu     sync.Mutex
}

type seriesKey struct{ scope, policy string }

// A series is the counters of one (scope, policy), each made on its outcome's first
// decision, so that a limit that never refuses shows no refused series.
type series struct {
	seriesKey
	counters [numOutcomes]atomic.Pointer[counter]
}

type counter struct{ prometheus.Counter }

// Outcomes, as the outcome label names them.
const (
	admitted      = metrics.Admitted
	refused       = metrics.Refused
	dryRunRefused = metrics.DryRunRefused
	storeError    = metrics.StoreError
	numOutcomes   = metrics.NumOutcomes
)

var outcomeNames = metrics.OutcomeNames

// Kinds of store error, as the kind label names them.
const (
	kindTimeout    = metrics.KindTimeout
	kindCanceled   = metrics.KindCanceled
	kindConnection = metrics.KindConnection
	kindOther      = metrics.KindOther
	numKinds       = metrics.NumKinds
)

// outcome classifies an event as otellimit does too. A function, not a variable holding
// one: a call through a variable would move the event to the heap.
func outcome(e *core.Event) int { return metrics.Outcome(e) }

// kind classifies a store's error as otellimit does too.
func kind(err error) int { return metrics.Kind(err) }

var kindNames = [numKinds]string{"timeout", "canceled", "connection", "other"}

// durationBuckets span a store on the same host to one that is timing out: the default
// buckets start where a network store is already slow.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New returns the Metrics registered on reg, prometheus.DefaultRegisterer if reg is nil.
// Calling it again with the same registerer returns the same Metrics, so that packages
// can each call New(nil) and share one set; to tell several sets apart on one registry
// (one per store, say) wrap reg with prometheus.WrapRegistererWith. New panics, as
// prometheus.MustRegister does, if reg holds other collectors of the same names.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reqlimit_requests_total",
			Help: "Requests a limit decided, by scope (the route pattern, or a WithScope name), policy and outcome: admitted, refused, dry_run_refused (over the limit but let through in dry run), store_error (the fail mode decided) or released (admitted, then given back by its status: core.WithCountWhen).",
		}, []string{"scope", "policy", "outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reqlimit_store_duration_seconds",
			Help:    "Time a store took to decide or to fail; the in-memory store is not timed and not recorded.",
			Buckets: durationBuckets,
		}),
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reqlimit_store_errors_total",
		Help: "Decisions the store failed, by kind: timeout, canceled, connection or other.",
	}, []string{"kind"})
	for k := range m.errors {
		m.errors[k] = errs.WithLabelValues(kindNames[k])
	}
	empty := map[seriesKey]*series{}
	m.series.Store(&empty)
	if err := reg.Register(&collector{m, errs}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if c, ok := are.ExistingCollector.(*collector); ok {
				return c.m
			}
		}
		panic(fmt.Sprintf("promlimit.New: %v", err))
	}
	return m
}

// collector registers a Metrics as one unit, so that a second New on the same registerer
// finds the first through prometheus.AlreadyRegisteredError.
type collector struct {
	m      *Metrics
	errors *prometheus.CounterVec
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.m.requests.Describe(ch)
	c.errors.Describe(ch)
	c.m.duration.Describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.m.requests.Collect(ch)
	c.errors.Collect(ch)
	c.m.duration.Collect(ch)
}

// Option returns a core.WithObserver option recording the decisions of the limits it is
// given to. Each call's option remembers the series its limit last used, which saves a
// lookup per decision; give each limit an Option of its own.
func (m *Metrics) Option() core.Option {
	if m == nil {
		// Refused where the limit is registered, not by a nil dereference in every request.
		return adapter.Refuse(errors.New("promlimit: the Option of a nil *Metrics: make it with promlimit.New"))
	}
	var last atomic.Pointer[series]
	return core.WithObserver(func(e core.Event) { m.observe(&last, &e) })
}

// Observe records one decision, for code that has an Event outside a limit's observers (a
// wrapper that filters or relabels events first); Option is the usual way, and adds to the
// limit's other observers.
func (m *Metrics) Observe(e core.Event) { m.observe(nil, &e) }

func (m *Metrics) observe(last *atomic.Pointer[series], e *core.Event) {
	o := outcome(e)
	if o < 0 {
		return
	}
	policy := ""
	if e.Policy != nil {
		policy = e.Policy.String()
	}
	var s *series
	if last != nil {
		s = last.Load()
	}
	if s == nil || s.scope != e.Scope || s.policy != policy {
		s = m.lookup(seriesKey{e.Scope, policy})
		if last != nil {
			last.Store(s)
		}
	}
	c := s.counters[o].Load()
	if c == nil {
		c = m.counter(s, o)
	}
	c.Inc()
	if o == storeError {
		m.errors[kind(e.Err)].Inc()
	}
	if e.StoreTime > 0 {
		m.duration.Observe(e.StoreTime.Seconds())
	}
}

// lookup returns the series of k, making it on first use.
func (m *Metrics) lookup(k seriesKey) *series {
	if s := (*m.series.Load())[k]; s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.series.Load()
	if s := old[k]; s != nil {
		return s
	}
	// The event's strings may live in a framework's reused buffers; the map keeps them.
	k = seriesKey{strings.Clone(k.scope), strings.Clone(k.policy)}
	s := &series{seriesKey: k}
	next := make(map[seriesKey]*series, len(old)+1)
	for key, v := range old {
		next[key] = v
	}
	next[k] = s
	m.series.Store(&next)
	return s
}

// counter makes the counter of outcome o in s. Two goroutines may both make it: the
// CounterVec hands both the same child.
func (m *Metrics) counter(s *series, o int) *counter {
	scope := s.scope
	if scope == "" {
		scope = unrouted
	}
	c := &counter{m.requests.WithLabelValues(scope, s.policy, outcomeNames[o])}
	s.counters[o].Store(c)
	return c
}
