package nethttp_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adaptertest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// counting serves one request to h through w behind a limit that counts by outcome, and
// returns the statuses its rule was asked about: the one Settle got, or none when the
// request was not settled.
func counting(w http.ResponseWriter, h http.HandlerFunc) []int {
	var seen []int
	rule := func(status int) bool { seen = append(seen, status); return true }
	limit := nethttp.Limit(100, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(rule))
	limit(h).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	return seen
}

// connWriter is a ResponseRecorder over a connection: a Flusher and a Hijacker, and a
// deadline setter for http.ResponseController.
type connWriter struct {
	*httptest.ResponseRecorder
	hijacked bool
	deadline time.Time
}

func newConnWriter() *connWriter { return &connWriter{ResponseRecorder: httptest.NewRecorder()} }

func (w *connWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return nil, nil, nil
}

func (w *connWriter) SetWriteDeadline(t time.Time) error { w.deadline = t; return nil }

// bare hides every method of its writer but http.ResponseWriter's.
type bare struct{ http.ResponseWriter }

// hijackOnly is a Hijacker that is not a Flusher.
type hijackOnly struct {
	http.ResponseWriter
	http.Hijacker
}

func TestCountWhenLearnsTheStatusWritten(t *testing.T) {
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		want []int // nil: not settled
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, []int{200}},
		{"body first", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi"); w.WriteHeader(401) }, []int{200}},
		{"status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }, []int{401}},
		{"first status wins", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401); w.WriteHeader(500) }, []int{401}},
		{"1xx then 200", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(103); w.WriteHeader(200) }, []int{200}},
		{"1xx then 401", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(100)
			w.WriteHeader(103)
			w.WriteHeader(401)
		}, []int{401}},
		{"101 is final", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(101); w.WriteHeader(401) }, []int{101}},
		{"flush first", func(w http.ResponseWriter, _ *http.Request) { w.(http.Flusher).Flush(); w.WriteHeader(401) }, []int{200}},
		{"flush through ResponseController", func(w http.ResponseWriter, _ *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			w.WriteHeader(401)
		}, []int{200}},
		{"body through ReadFrom", func(w http.ResponseWriter, _ *http.Request) { io.Copy(w, strings.NewReader("hi")); w.WriteHeader(401) }, []int{200}},
		{"hijacked", func(w http.ResponseWriter, _ *http.Request) { w.(http.Hijacker).Hijack() }, nil},
		{"hijacked through ResponseController", func(w http.ResponseWriter, _ *http.Request) {
			if _, _, err := http.NewResponseController(w).Hijack(); err != nil {
				t.Error(err)
			}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := counting(newConnWriter(), c.h); !slices.Equal(got, c.want) {
				t.Errorf("settled with %v, want %v", got, c.want)
			}
		})
	}
}

// A failed hijack leaves the response the handler's to write: it is settled.
func TestCountWhenSettlesAFailedHijack(t *testing.T) {
	got := counting(bare{httptest.NewRecorder()}, func(w http.ResponseWriter, _ *http.Request) {
		if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Hijack: %v, want ErrNotSupported", err)
		}
		w.WriteHeader(401)
	})
	if !slices.Equal(got, []int{401}) {
		t.Errorf("settled with %v, want [401]", got)
	}
}

// A handler that panics is not settled (its request counts), and its panic goes on as it was.
func TestCountWhenPanicIsNotSettled(t *testing.T) {
	boom := errors.New("boom")
	var got []int
	p := func() (p any) {
		defer func() { p = recover() }()
		got = counting(httptest.NewRecorder(), func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401); panic(boom) })
		return nil
	}()
	if p != boom || got != nil {
		t.Errorf("panic %v, settled with %v; want the handler's panic and no settling", p, got)
	}
}

// The handler finds the writer's own interfaces, no more and no fewer, and reaches the
// writer's other methods through http.ResponseController.
func TestCountWhenKeepsTheWritersInterfaces(t *testing.T) {
	cw := newConnWriter()
	for _, c := range []struct {
		name           string
		w              http.ResponseWriter
		flush, hijack  bool
		flushSupported bool
	}{
		{"recorder", httptest.NewRecorder(), true, false, true},
		{"connection", cw, true, true, true},
		{"bare", bare{httptest.NewRecorder()}, false, false, false},
		{"hijacker only", hijackOnly{httptest.NewRecorder(), cw}, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			counting(c.w, func(w http.ResponseWriter, _ *http.Request) {
				_, flush := w.(http.Flusher)
				_, hijack := w.(http.Hijacker)
				if flush != c.flush || hijack != c.hijack {
					t.Errorf("Flusher %v, Hijacker %v; want %v, %v", flush, hijack, c.flush, c.hijack)
				}
				if err := http.NewResponseController(w).Flush(); (err == nil) != c.flushSupported {
					t.Errorf("ResponseController's Flush: %v", err)
				}
			})
		})
	}

	rec := httptest.NewRecorder()
	counting(rec, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "a"); w.(http.Flusher).Flush() })
	if !rec.Flushed || rec.Body.String() != "a" {
		t.Errorf("flushed %v, body %q: Flush did not reach the writer", rec.Flushed, rec.Body)
	}

	deadline := time.Now().Add(time.Minute)
	counting(cw, func(w http.ResponseWriter, _ *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(deadline); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
	})
	if !cw.deadline.Equal(deadline) {
		t.Errorf("the writer's deadline is %v, want %v: ResponseController did not unwrap", cw.deadline, deadline)
	}
}

// A limit that does not count by outcome hands the handler the writer it was given.
func TestWithoutCountWhenTheWriterIsNotWrapped(t *testing.T) {
	rec := httptest.NewRecorder()
	limit := nethttp.Limit(100, time.Minute, core.WithStore(core.NewMemoryStore(nil)))
	limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if w != http.ResponseWriter(rec) {
			t.Errorf("the handler got %T, want the recorder itself", w)
		}
	})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
}

// A handler that takes the connection over, on a real connection, counts.
func TestCountWhenHijackCounts(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /ws", nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { adaptertest.Hijack(w) })))
	adaptertest.CheckHijackCounts(t, mux)
}

// unwrapOnly is an outer middleware's writer in the Go 1.20 style: Unwrap, no Hijack.
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Behind a writer that only unwraps, a handler's hijack through http.ResponseController
// must still be seen: the connection counts. It went past the limit's writer unseen.
func TestHijackThroughAnUnwrappingWriterCounts(t *testing.T) {
	limit := nethttp.Limit(1, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithCountWhen(core.Failed))
	inner := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { adaptertest.Hijack(w) }))
	adaptertest.CheckHijackCounts(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(unwrapOnly{w}, r)
	}))
}
