// Command compare measures reqlimit beside its peers, all enforcing "100 per second", and
// writes a Markdown table and an SVG chart:
//
//	cd docs/compare && go run . -out ../comparison.md -svg ../comparison.svg
//
// It is a separate module so that reqlimit's users never download the peers. See
// README.md in this folder for what each number means.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

// The policy every limiter enforces, unless a measurement says otherwise.
const (
	limitN = 100
	limitT = time.Second
)

// settings are the run's sizes; -quick shrinks them for development.
type settings struct {
	steadyGap, steady time.Duration // one caller, one arrival per steadyGap
	floodWorkers      int
	flood             time.Duration
	floodMaxCalls     int // per worker: bounds the loop by count as well as by time
	bursts            time.Duration
	speedRounds       int           // rounds of the speed columns (see speedPlan)
	speedBatch        time.Duration // each side's batch per round
	memKeys           int
	seed              uint64
}

var full = settings{
	steadyGap: 8 * time.Millisecond, steady: 5 * time.Second,
	floodWorkers: 8, flood: 3 * time.Second, floodMaxCalls: 20_000_000,
	bursts:      5 * time.Second,
	speedRounds: 80, speedBatch: 10 * time.Millisecond,
	memKeys: 20_000,
	seed:    1,
}

// quick keeps every scenario longer than T, or it could not see a window's edge.
func quickSettings() settings {
	q := full
	q.steady, q.flood, q.bursts = 2500*time.Millisecond, 1500*time.Millisecond, 2500*time.Millisecond
	q.speedRounds, q.speedBatch = 30, 3*time.Millisecond
	q.memKeys = 2_000
	return q
}

func main() {
	if err := run(); err != nil {
		fatal(err)
	}
}

func run() error {
	out := flag.String("out", "", "write the Markdown table to this file (default: standard output)")
	svg := flag.String("svg", "", "write the SVG chart to this file")
	quickFlag := flag.Bool("quick", false, "short runs, for development (figures are rougher)")
	useRedis := flag.Bool("redis", true, "measure the Redis-backed limiters (starts its own redis-server)")
	redisBin := flag.String("redis-server", "redis-server", "the redis-server binary")
	only := flag.String("only", "", "measure only the limiters whose name matches this regexp")
	flag.Parse()

	cfg := full
	if *quickFlag {
		cfg = quickSettings()
	}
	var match *regexp.Regexp
	if *only != "" {
		var err error
		if match, err = regexp.Compile(*only); err != nil {
			return err
		}
	}

	var list []peer
	needRedis := false
	for _, p := range peers() {
		if (match != nil && !match.MatchString(p.name)) || (p.redis && !*useRedis) {
			continue
		}
		list = append(list, p)
		needRedis = needRedis || p.redis
	}

	var srv *redisServer
	if needRedis {
		bin, err := exec.LookPath(*redisBin)
		if err != nil {
			return fmt.Errorf("%v; install redis-server or pass -redis=false", err)
		}
		if srv, err = startRedis(bin); err != nil {
			return err
		}
		rdb = srv.client
		// An interrupted run must not leave its redis-server behind.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() { <-sig; srv.stop(); os.Exit(130) }()
		defer srv.stop()
	}

	start := time.Now()
	env := describeEnv(srv, cfg, *quickFlag, *useRedis)
	rows := make([]row, 0, len(list))
	for _, p := range list {
		rows = append(rows, measure(p, cfg, srv))
	}
	measureSpeeds(rows, cfg)
	env.took = time.Since(start)
	logf("all measured in %s", elapsed(start))

	md := markdown(env, cfg, rows)
	if *out == "" {
		os.Stdout.WriteString(md)
	} else if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
		return err
	}
	if *svg != "" {
		if err := os.WriteFile(*svg, []byte(chart(rows)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// A row is one limiter's figures.
type row struct {
	peer                  peer
	steady, flood, bursts result
	speed                 spread // library: ns per decision; middleware: ns the limiter adds to the route
	overhead              spread // middleware: limited route / bare route; not measured for library peers
	bytesPerKey           float64
	notes                 []string // what failed, in words
}

func (r *row) note(what string, err error) {
	r.notes = append(r.notes, fmt.Sprintf("%s: %v", what, err))
	logf("  %s: %v", what, err)
}

// measure runs the strictness and memory measurements on p, each on a fresh instance so
// none sees another's state; measureSpeeds times it beside its peers.
func measure(p peer, cfg settings, srv *redisServer) row {
	r := row{peer: p}
	logf("%s", p.name)
	scenarios := []struct {
		name string
		dst  *result
		run  func(allowFunc) *trace
	}{
		{"steady", &r.steady, func(a allowFunc) *trace {
			return runSchedule(a, benchKey, steadySchedule(cfg.steadyGap, cfg.steady), cfg.steady+2*time.Second)
		}},
		{"flood", &r.flood, func(a allowFunc) *trace {
			return flood(a, benchKey, cfg.floodWorkers, cfg.flood, cfg.floodMaxCalls)
		}},
		{"bursts", &r.bursts, func(a allowFunc) *trace {
			return runSchedule(a, benchKey, burstSchedule(cfg.seed, cfg.bursts), cfg.bursts+2*time.Second)
		}},
	}
	for _, sc := range scenarios {
		t0 := time.Now()
		allow, err := p.newAllow(limitN, limitT)
		if err != nil {
			r.note(sc.name, err)
			continue
		}
		*sc.dst = sc.run(allow).result(limitN, limitT)
		if sc.dst.errs > 0 {
			r.note(sc.name, fmt.Errorf("%d of %d calls failed, first: %v", sc.dst.errs, sc.dst.calls, sc.dst.firstErr))
		}
		logf("  %-6s max %3d in %v, admitted %d of exact %d (%.1f%%), %d calls, %s",
			sc.name, sc.dst.maxIn, limitT, sc.dst.admitted, sc.dst.exact, sc.dst.util, sc.dst.calls, elapsed(t0))
	}

	// A minute's window, so that no limiter's expiry or sweeping drops keys while they
	// are counted; the state per key is the same as for a second.
	t0 := time.Now()
	keys := memKeys(cfg.memKeys)
	if allow, err := p.newAllow(limitN, time.Minute); err != nil {
		r.note("memory", err)
	} else {
		var per float64
		if p.redis {
			per, err = redisPerKey(srv, allow, keys)
		} else {
			per, err = heapPerKey(allow, keys)
		}
		if err != nil {
			r.note("memory", err)
		} else {
			r.bytesPerKey = per
			logf("  memory %.0f B/key, %s", per, elapsed(t0))
		}
	}
	return r
}

// measureSpeeds fills the rows' speed columns, each group in one interleaved measurement
// (measureGroup): the library peers in memory, those on Redis, and each framework's
// middleware with its bare route. All take their peer's fast limit, which never runs out
// at benchmark speed.
func measureSpeeds(rows []row, cfg settings) {
	groups := map[string][]*row{}
	var order []string
	for i := range rows {
		r := &rows[i]
		g := r.peer.framework
		if g == "" {
			g = map[bool]string{false: "libraries in memory", true: "libraries on Redis"}[r.peer.redis]
		}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], r)
	}
	plan := speedPlan{rounds: cfg.speedRounds, batch: cfg.speedBatch, now: time.Now}
	for _, g := range order {
		t0 := time.Now()
		logf("speed: %s", g)
		var allows []allowFunc
		var timed []*row
		for _, r := range groups[g] {
			fast, err := r.peer.newAllow(r.peer.fast.count, r.peer.fast.period)
			if err != nil {
				r.note("speed", err)
				continue
			}
			allows, timed = append(allows, fast), append(timed, r)
		}
		if len(timed) == 0 {
			continue // nothing left to time beside the bare route
		}
		var bare allowFunc
		route, ok := bareRoutes[g]
		if ok {
			bare = route()
		}
		speeds, ratios, err := measureGroup(bare, allows, plan)
		if !ok && groups[g][0].peer.framework != "" {
			err = fmt.Errorf("no bare route for %s", g)
		}
		for i, r := range timed {
			if err != nil {
				r.note("speed", err)
				continue
			}
			r.speed, r.overhead = speeds[i], ratios[i]
			logf("  %-40s %s ns/decision %s", r.peer.name, nsCell(*r), overheadCell(*r))
		}
		logf("  %d rounds, %s", plan.rounds, elapsed(t0))
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
