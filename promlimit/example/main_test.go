package main

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

// TestMetricsShowTheDecisions runs the app on a loopback server and reads /metrics as
// Prometheus would scrape it. The counts are checked against the statuses the client saw:
// the limits count in the process-wide default store, which a repeated run
// (go test -count=2) finds already full for 127.0.0.1.
func TestMetricsShowTheDecisions(t *testing.T) {
	srv := httptest.NewServer(newMux(prometheus.NewRegistry()))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	seen := map[int]int{}
	for range 4 {
		code, _ := get("/user/test")
		seen[code]++
	}
	if seen[429] == 0 || seen[200]+seen[429] != 4 {
		t.Fatalf("statuses %v for 4 requests to a 3/1m route", seen)
	}
	get("/search")

	code, metrics := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: status %d", code)
	}
	want := []string{
		fmt.Sprintf(`reqlimit_requests_total{outcome="refused",policy="3/1m",scope="GET /user/test"} %d`, seen[429]),
		`reqlimit_requests_total{outcome="admitted",policy="5/1s,20/1m",scope="GET /search"} 1`,
		`reqlimit_store_errors_total{kind="timeout"} 0`,
		`reqlimit_store_duration_seconds_count 0`,
	}
	if seen[200] > 0 {
		want = append(want, fmt.Sprintf(`reqlimit_requests_total{outcome="admitted",policy="3/1m",scope="GET /user/test"} %d`, seen[200]))
	} else if strings.Contains(metrics, `outcome="admitted",policy="3/1m"`) {
		t.Error("/metrics shows admitted requests to /user/test; none was")
	}
	for _, line := range want {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	if strings.Contains(metrics, "127.0.0.1") {
		t.Error("/metrics names the client")
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", metrics)
	}
}

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }
