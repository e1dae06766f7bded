// Package show runs the tour: it starts each app on a loopback port, sends requests to a
// route limited to 3 per minute, and prints what came back.
package show

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// An App is one adapter's demo server: Serve starts it on ln and returns what stops it.
type App struct {
	Name  string
	Serve func(ln net.Listener) (stop func())
}

// NetHTTP is the net/http demo. Each demo gets its own store, so that the apps' counts do
// not mix.
var NetHTTP = App{"net/http", func(ln net.Listener) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, core.WithStore(core.NewMemoryStore(nil)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })))
	return ServeHTTP(ln, mux)
}}

// Run visits each app in turn, and fails if one answers other than the limit promises.
func Run(out io.Writer, apps ...App) error {
	fmt.Fprintln(out, "GET /user/test is limited to 3 requests per minute per client (like @RequestLimit(count = 3, period = 60)).")
	fmt.Fprintln(out)
	for _, a := range apps {
		if err := visit(out, a); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
	}
	return nil
}

func visit(out io.Writer, a App) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	stop := a.Serve(ln)
	defer stop()
	url := "http://" + ln.Addr().String() + "/user/test"
	client := &http.Client{Timeout: 5 * time.Second}

	// reqlimit warns of the forged header below, which comes from this machine's own
	// loopback address, as it would of a proxy on this host that nobody trusted: the
	// warning is shown after the table, with what it means here.
	warned := new(warnings)
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(warned))

	fmt.Fprintf(out, "%s on %s\n", a.Name, ln.Addr())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\trequest\tstatus\tRateLimit\tRetry-After\tbody")
	for i := 1; i <= 5; i++ {
		req, _ := http.NewRequest("GET", url, nil)
		what := "GET /user/test"
		if i == 5 {
			req.Header.Set("X-Forwarded-For", "203.0.113.77")
			what += " + forged X-Forwarded-For"
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", i, what, resp.StatusCode,
			orDash(resp.Header.Get("RateLimit")), orDash(resp.Header.Get("Retry-After")), strings.TrimSpace(string(body)))
		if want := map[bool]int{true: 200, false: 429}[i <= 3]; resp.StatusCode != want {
			tw.Flush()
			return fmt.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	tw.Flush()
	for _, w := range warned.all() {
		fmt.Fprintf(out, "  reqlimit warned: %s\n", w)
		fmt.Fprintln(out, "  Here the tour forged row 5's header itself, from 127.0.0.1, so ignoring it is right;")
		fmt.Fprintln(out, "  behind a real proxy on this host, see the README's production checklist.")
	}
	fmt.Fprintln(out)
	return nil
}

// warnings is a slog.Handler that keeps the warnings reqlimit logs.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "warning" {
			w.mu.Lock()
			w.seen = append(w.seen, a.Value.String())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ServeHTTP serves h on ln until the returned function is called.
func ServeHTTP(ln net.Listener, h http.Handler) func() {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }
}

// Check runs the tour of apps and checks its output: each app visited, the fourth and
// fifth requests refused, and the spent quota's wait whole seconds until the first grant
// leaves the window (60 on a machine that keeps up; a machine that stalls between the
// tour's requests takes off as many seconds as the tour took, at most).
func Check(apps ...App) (string, error) {
	var out strings.Builder
	start := time.Now()
	if err := Run(&out, apps...); err != nil {
		return out.String(), err
	}
	took := time.Since(start)
	wants := []string{"429", "Too Many Requests", "forged X-Forwarded-For", "reqlimit warned: "}
	for _, a := range apps {
		wants = append(wants, a.Name+" on")
	}
	for _, want := range wants {
		if !strings.Contains(out.String(), want) {
			return out.String(), fmt.Errorf("tour output lacks %q", want)
		}
	}
	spent := regexp.MustCompile(`"3/1m";r=0;t=(\d+)`).FindAllStringSubmatch(out.String(), -1)
	if len(spent) != 3*len(apps) {
		return out.String(), fmt.Errorf("tour output has %d spent quotas, want %d", len(spent), 3*len(apps))
	}
	lo := 60 - int(math.Ceil(took.Seconds()))
	for _, m := range spent {
		if n, _ := strconv.Atoi(m[1]); n < lo || n > 60 {
			return out.String(), fmt.Errorf("tour output has %s, want t=60, or at least %d after a tour of %v", m[0], lo, took)
		}
	}
	return out.String(), nil
}
