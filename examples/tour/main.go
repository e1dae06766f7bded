// Command tour shows reqlimit at work, in memory, with no setup: it starts each adapter on
// a loopback port, sends requests to a route limited to 3 per minute, and prints what came
// back. The fourth request is refused with 429 and an exact Retry-After; a fifth with a
// forged X-Forwarded-For is refused too, because forwarded headers count only from
// trusted proxies.
//
//	go run ./examples/tour
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// An app is one adapter's demo server.
type app struct {
	name  string
	serve func(ln net.Listener) (stop func())
}

// apps lists the adapters the tour visits, in order.
var apps = []app{
	{"net/http", serveNetHTTP},
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	fmt.Fprintln(out, "GET /user/test is limited to 3 requests per minute per client (like @RequestLimit(count = 3, period = 60)).")
	fmt.Fprintln(out)
	for _, a := range apps {
		if err := visit(out, a); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return nil
}

func visit(out io.Writer, a app) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	stop := a.serve(ln)
	defer stop()
	url := "http://" + ln.Addr().String() + "/user/test"
	client := &http.Client{Timeout: 5 * time.Second}

	fmt.Fprintf(out, "%s on %s\n", a.name, ln.Addr())
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
	fmt.Fprintln(out)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
