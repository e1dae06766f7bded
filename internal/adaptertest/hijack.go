package adaptertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Hijack answers a request by taking its connection over and writing a 101 on it itself,
// as a WebSocket upgrade does: the response has no status the framework saw.
func Hijack(w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n")
	rw.Flush()
	conn.Close()
}

// CheckHijackCounts serves h, whose GET /ws is limited to 1 a minute counting only failures
// (core.WithCountWhen(core.Failed)) and answered by Hijack, on a loopback server: the first
// request is taken over, and since its status is unknown it counts, so the second is
// refused.
func CheckHijackCounts(t *testing.T, h http.Handler) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	CheckHijackCountsAt(t, srv.Listener.Addr().String())
}

// CheckHijackCountsAt is CheckHijackCounts for an application already serving at addr
// (Fiber's, on fasthttp).
func CheckHijackCountsAt(t *testing.T, addr string) {
	t.Helper()
	for i, want := range []string{"101", "429"} {
		if got := StatusAt(t, addr, "GET", "/ws"); got != want {
			t.Fatalf("request %d: status %s, want %s: a connection taken over must count", i+1, got, want)
		}
	}
}

// StatusAt sends method path on a new connection to addr and returns the status code of
// the response, or "" when the server closes the connection without one.
func StatusAt(t *testing.T, addr, method, path string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", method, path); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err == io.EOF && line == "" {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		t.Fatalf("status line %q", line)
	}
	return fields[1]
}
