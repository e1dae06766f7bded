package adapter

import (
	"bufio"
	"net"
	"net/http"
)

// A HijackWatch wraps a response writer to learn whether the handler took the connection
// over (a WebSocket, say): such a response has no status that a limit counting by outcome
// could read, so it is not settled, and counts. Hijack goes through http.ResponseController,
// so it works whenever the wrapped writer's chain can; Unwrap keeps the controller reaching
// the writer's other methods.
type HijackWatch struct {
	http.ResponseWriter
	Hijacked bool
}

// Hijack takes the connection over, and notes that it did.
func (w *HijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.Hijacked = true
	}
	return c, rw, err
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *HijackWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }
