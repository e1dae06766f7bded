// Command example is a net/http application whose limits report through OpenTelemetry:
// GET /user/test 3 a minute, GET /search 5 a second and 20 a minute. The metrics are
// printed to stdout as JSON every -interval and when the app stops (Ctrl-C); an
// application would give the provider an OTLP exporter instead.
//
//	go run ./otellimit/example -addr 127.0.0.1:8080 -interval 10s
//	curl -s 127.0.0.1:8080/user/test
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/otellimit"
)

// newApp returns the app's routes and the provider their metrics go through, exporting to
// out every interval and on Shutdown.
func newApp(out io.Writer, interval time.Duration) (*http.ServeMux, *sdkmetric.MeterProvider, error) {
	exp, err := stdoutmetric.New(stdoutmetric.WithWriter(out), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))))
	m := otellimit.New(mp) // with otel.SetMeterProvider(mp), otellimit.New(nil) would do
	mux := http.NewServeMux()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.Handle("GET /user/test", nethttp.Limit(3, time.Minute, m.Option())(hello))
	mux.Handle("GET /search", nethttp.Limit(5, time.Second, core.WithRate(20, time.Minute), m.Option())(hello))
	return mux, mp, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	interval := flag.Duration("interval", 10*time.Second, "how often to print the metrics")
	flag.Parse()
	mux, mp, err := newApp(os.Stdout, *interval)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv := newServer(*addr, mux)
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	log.Printf("listening on http://%s", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	// Shutdown exports what the last interval recorded.
	if err := mp.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// newServer serves h on addr with a bound on each stage of a connection: a client that
// sends its request slowly, or idles on a kept-alive connection, would otherwise hold it
// as long as it likes, and a limit only sees a request once it is read.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
}
