package adapter

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"syscall"
)

// A StatusWriter records the status of the response written through it, for a limit that
// counts by outcome (core.WithCountWhen), and whether the handler took the connection over
// (a WebSocket, say): such a response has no status, is not settled, and counts. Adapters
// put it in front of the writer handlers get, so that it sees what they write whatever
// wraps that writer.
type StatusWriter struct {
	http.ResponseWriter
	status   int  // 0 until the status is sent
	hijacked bool // the connection was taken over: no status is known
}

// Wrap returns s's writer wrapped in s, as an http.Flusher exactly when the writer is one,
// so that a handler asking finds what it would find unwrapped, and as an http.Hijacker
// when the writer is one or unwraps: a hijack that http.ResponseController made through
// the chain past s would go unseen.
func (s *StatusWriter) Wrap() http.ResponseWriter {
	_, f := s.ResponseWriter.(http.Flusher)
	_, h := s.ResponseWriter.(http.Hijacker)
	if !h {
		_, h = s.ResponseWriter.(interface{ Unwrap() http.ResponseWriter })
	}
	switch {
	case f && h:
		return flushHijacker{flusher{s}}
	case f:
		return flusher{s}
	case h:
		return hijacker{s}
	}
	return s
}

// Written returns the status written through s, 0 if none was; hijacked says whether the
// connection was taken over.
func (s *StatusWriter) Written() (status int, hijacked bool) { return s.status, s.hijacked }

func (s *StatusWriter) sent(status int) {
	if s.status == 0 {
		s.status = status
	}
}

// WriteHeader records the first final status (or a switch of protocols), not a 1xx one
// that precedes it.
func (s *StatusWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		s.sent(code)
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 when no status was written first, as net/http sends it.
func (s *StatusWriter) Write(p []byte) (int, error) {
	s.sent(http.StatusOK)
	return s.ResponseWriter.Write(p)
}

// ReadFrom keeps the writer's own ReadFrom (sendfile, for http.ServeContent) when it has one.
func (s *StatusWriter) ReadFrom(r io.Reader) (n int64, err error) {
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(writerOnly{s.ResponseWriter}, r)
	}
	if n > 0 {
		s.sent(http.StatusOK)
	}
	return n, err
}

// FlushError is what http.ResponseController's Flush finds, whether or not the writer
// is an http.Flusher itself: a flush the writer's own wrappers reach still sends 200.
func (s *StatusWriter) FlushError() error {
	err := http.NewResponseController(s.ResponseWriter).Flush()
	if err == nil {
		s.sent(http.StatusOK)
	}
	return err
}

// Unwrap returns the writer, for http.ResponseController.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *StatusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil {
		s.hijacked = true
	}
	return c, rw, err
}

type flusher struct{ *StatusWriter }

func (w flusher) Flush() { w.FlushError() }

type hijacker struct{ *StatusWriter }

func (w hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

type flushHijacker struct{ flusher }

func (w flushHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.hijack() }

// writerOnly hides a writer's ReadFrom, so that io.Copy does not call it back.
type writerOnly struct{ io.Writer }

// Closed reports whether a handler closed the connection c without a response through its
// framework (Fiber's c.Drop and c.End, or Conn().Close()): the status left in the
// framework's response is then not the one sent. A closed connection no longer lends its
// file descriptor; one without (a test pipe) is taken as open.
func Closed(c net.Conn) bool {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		return Closed(t.NetConn())
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	return err != nil || rc.Control(func(uintptr) {}) != nil
}
