package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

var clients atomic.Uint32

// newClient returns a client address no earlier call did: the program counts in the
// process-wide default store, which outlives one run of a test (go test -count=2).
func newClient() string {
	n := clients.Add(1)
	return fmt.Sprintf("192.0.2.%d:1234", n%250+1)
}

// The README shows this program whole: its one ```go block after "## A complete program"
// must be main.go, byte for byte, so that the two never drift apart.
func TestReadmeShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "\n## A complete program\n")
	if !found {
		t.Fatal(`README.md has no "## A complete program" section`)
	}
	_, block, found := strings.Cut(section, "```go\n")
	block, _, closed := strings.Cut(block, "```\n")
	if !found || !closed {
		t.Fatal(`README.md's "A complete program" section has no Go block`)
	}
	if block != string(program) {
		t.Errorf("README.md's program is not examples/quickstart/main.go; paste main.go into the README:\n%s", block)
	}
}

// One request through the program's handler is admitted and tells the client its quota.
func TestProgramAdmitsAndReportsTheQuota(t *testing.T) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/hello", nil)
	r.RemoteAddr = newClient()
	newMux().ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Body.String() != "hello\n" {
		t.Fatalf("GET /hello: %d %q, want 200 \"hello\\n\"", w.Code, w.Body.String())
	}
	if got, want := w.Header().Get("RateLimit"), `"3/1m";r=2;t=60`; got != want {
		t.Errorf("RateLimit: %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"3/1m";q=3;w=60`; got != want {
		t.Errorf("RateLimit-Policy: %q, want %q", got, want)
	}
}

// The fourth request of a client within the minute is refused, with a wait to retry after.
func TestProgramRefusesTheFourth(t *testing.T) {
	mux, client := newMux(), newClient()
	var w *httptest.ResponseRecorder
	for range 4 {
		w = httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/hello", nil)
		r.RemoteAddr = client
		mux.ServeHTTP(w, r)
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("4th GET /hello: %d, Retry-After %q; want 429 and a wait", w.Code, w.Header().Get("Retry-After"))
	}
}
