// Package otellimit records the decisions of reqlimit's limits as OpenTelemetry metrics,
// with one option that works with every adapter. Read New for the instruments, Example for
// a limit read back through the SDK's ManualReader, and docs/metrics.md for the names,
// attributes and cardinality promise in full:
//
//	m := otellimit.New(nil) // on otel.GetMeterProvider()
//	r.GET("/user/test", ginlimit.Limit(3, time.Minute, m.Option()), h)
//	mux.Handle("GET /search", nethttp.Limit(500, 2*time.Second, m.Option())(h))
//
// The instruments follow the style of the semantic conventions' stable
// aspnetcore.rate_limiting.* metrics: reqlimit.requests counts decisions by
// reqlimit.scope, reqlimit.policy and reqlimit.result. Attributes never carry the client
// key or IP, so the number of attribute sets is bounded by the limits an application
// registers, not by its clients. A decision costs one atomic addition and allocates
// nothing once its attribute set exists: reqlimit.requests is an asynchronous counter,
// whose totals the SDK reads when it collects.
package otellimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/metrics"
)

// ScopeName is the instrumentation scope (the meter's name) of the instruments.
const ScopeName = "github.com/reqlimit/reqlimit/otellimit"

// unrouted is the reqlimit.scope of decisions made where the route was not known: by a
// limit mounted before routing, or for a request that matched no route (Event.Scope "").
const unrouted = "unrouted"

// Attribute keys. error.type is the semantic conventions' own, with its "_OTHER" for an
// error outside the known kinds.
const (
	scopeKey     = attribute.Key("reqlimit.scope")
	policyKey    = attribute.Key("reqlimit.policy")
	resultKey    = attribute.Key("reqlimit.result")
	errorTypeKey = attribute.Key("error.type")
)

// Metrics records limits' decisions with three instruments: the counters
// reqlimit.requests {request} (asynchronous) and reqlimit.store.errors {error}, and the
// histogram reqlimit.store.duration (s). reqlimit.scope is "unrouted" for decisions made
// where the route was not known. One Metrics serves any number of limits; it is safe for
// concurrent use.
type Metrics struct {
	requests metric.Int64ObservableCounter
	errors   metric.Int64Counter
	duration metric.Float64Histogram
	errOpts  [numKinds][]metric.AddOption

	// series maps a (scope, policy) to its counts. It is copied on write, so the
	// decisions of every limit read it without a lock; it grows once per new pair.
	series atomic.Pointer[map[seriesKey]*series]
	mu     sync.Mutex
}

type seriesKey struct{ scope, policy string }

// A series is the counts of one (scope, policy), one per result, and the options that
// report them, built with their attribute sets once. The SDK's synchronous counter would
// look the attribute set up in its map on every decision; an atomic here costs a
// fraction of that, and collection reads the totals.
type series struct {
	seriesKey
	counts [numResults]atomic.Int64
	opts   [numResults][]metric.ObserveOption
}

// Results, as reqlimit.result names them.
const (
	admitted      = metrics.Admitted
	refused       = metrics.Refused
	dryRunRefused = metrics.DryRunRefused
	storeError    = metrics.StoreError
	numResults    = metrics.NumOutcomes
)

var resultNames = metrics.OutcomeNames

// Kinds of store error, as error.type names them.
const (
	kindTimeout    = metrics.KindTimeout
	kindCanceled   = metrics.KindCanceled
	kindConnection = metrics.KindConnection
	kindOther      = metrics.KindOther
	numKinds       = metrics.NumKinds
)

// result classifies an event as promlimit does too. A function, not a variable holding
// one: a call through a variable would move the event to the heap.
func result(e *core.Event) int { return metrics.Outcome(e) }

// kind classifies a store's error as promlimit does too.
func kind(err error) int { return metrics.Kind(err) }

var kindNames = [numKinds]string{"timeout", "canceled", "connection", "_OTHER"}

// durationBounds span a store on the same host to one that is timing out: the SDK's
// default bounds suit milliseconds, not seconds.
var durationBounds = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New returns Metrics whose instruments come from mp's meter ScopeName; nil means
// otel.GetMeterProvider(), which forwards to whatever provider otel.SetMeterProvider sets,
// even later. Make one per provider and give each limit its Option: each Metrics
// registers a callback with the provider for as long as the provider lives. Instruments
// the provider cannot make are reported to otel.Handle and record nothing.
func New(mp metric.MeterProvider) *Metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	noops := noop.Meter{}
	report := func(err error) {
		if err != nil {
			otel.Handle(err)
		}
	}
	m := &Metrics{}
	var err error
	if m.requests, err = meter.Int64ObservableCounter("reqlimit.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests a limit decided, by reqlimit.result: admitted, refused, dry_run_refused (over the limit but let through in dry run), store_error (the fail mode decided) or released (admitted, then given back by its status: core.WithCountWhen).")); err != nil || m.requests == nil {
		report(err)
		m.requests, _ = noops.Int64ObservableCounter("")
	}
	if m.errors, err = meter.Int64Counter("reqlimit.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Decisions the store failed, by error.type: timeout, canceled, connection or _OTHER.")); err != nil || m.errors == nil {
		report(err)
		m.errors, _ = noops.Int64Counter("")
	}
	if m.duration, err = meter.Float64Histogram("reqlimit.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a store took to decide or to fail; the in-memory store is not timed and not recorded."),
		metric.WithExplicitBucketBoundaries(durationBounds...)); err != nil || m.duration == nil {
		report(err)
		m.duration, _ = noops.Float64Histogram("")
	}
	for k := range m.errOpts {
		m.errOpts[k] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(errorTypeKey.String(kindNames[k])))}
	}
	empty := map[seriesKey]*series{}
	m.series.Store(&empty)
	if _, err := meter.RegisterCallback(m.collect, m.requests); err != nil {
		report(err)
	}
	return m
}

// collect reports the totals of the results that have happened.
func (m *Metrics) collect(_ context.Context, o metric.Observer) error {
	for _, s := range *m.series.Load() {
		for r := range s.counts {
			if n := s.counts[r].Load(); n > 0 {
				o.ObserveInt64(m.requests, n, s.opts[r]...)
			}
		}
	}
	return nil
}

// Option returns a core.WithObserver option recording the decisions of the limits it is
// given to. Each call's option remembers the series its limit last used, which saves a
// lookup per decision; give each limit an Option of its own.
func (m *Metrics) Option() core.Option {
	if m == nil {
		// Refused where the limit is registered, not by a nil dereference in every request.
		return adapter.Refuse(errors.New("otellimit: the Option of a nil *Metrics: make it with otellimit.New"))
	}
	var last atomic.Pointer[series]
	return core.WithObserver(func(e core.Event) { m.observe(&last, &e) })
}

// Observe records one decision, for code that has an Event outside a limit's observers (a
// wrapper that filters or relabels events first); Option is the usual way, and adds to the
// limit's other observers.
func (m *Metrics) Observe(e core.Event) { m.observe(nil, &e) }

func (m *Metrics) observe(last *atomic.Pointer[series], e *core.Event) {
	r := result(e)
	if r < 0 {
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
	s.counts[r].Add(1)
	// Both are synchronous: store errors are rare, and a store that is timed is one
	// across a network, whose round trip dwarfs the SDK's work. The event carries no
	// context: exemplars of a decision would point at the request's span, which the
	// caller records anyway.
	if r == storeError {
		m.errors.Add(context.Background(), 1, m.errOpts[kind(e.Err)]...)
	}
	if e.StoreTime > 0 {
		m.duration.Record(context.Background(), e.StoreTime.Seconds())
	}
}

// lookup returns the series of k, making them on first use.
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
	scope := k.scope
	if scope == "" {
		scope = unrouted
	}
	for r := range s.opts {
		set := attribute.NewSet(scopeKey.String(scope), policyKey.String(k.policy), resultKey.String(resultNames[r]))
		s.opts[r] = []metric.ObserveOption{metric.WithAttributeSet(set)}
	}
	next := make(map[seriesKey]*series, len(old)+1)
	for key, v := range old {
		next[key] = v
	}
	next[k] = s
	m.series.Store(&next)
	return s
}
