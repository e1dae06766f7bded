// Package fastheader reads request header fields and forwarded addresses, and runs deny
// functions, for the adapters of frameworks built on fasthttp (Fiber v2 and v3), which
// share its rules.
package fastheader

import (
	"bytes"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/hook"
	"github.com/reqlimit/reqlimit/internal/nocopy"
)

// Lines returns the lines of the request header field name, the request's own bytes, in
// the order they came. fasthttp adds a chunked request's trailer fields to its header, and
// a trusted proxy passes the trailer on as the client wrote it: Lines keeps only as many
// lines as the header as received held (a request built in code has no trailer).
func Lines(h *fasthttp.RequestHeader, name string) [][]byte {
	lines := h.PeekAll(name)
	if len(lines) == 0 || len(h.RawHeaders()) == 0 {
		return lines
	}
	n, want := 0, nocopy.Bytes(name) // only read
	for k := range h.AllInOrder() {
		if bytes.EqualFold(k, want) {
			n++
		}
	}
	// The trailer's lines are the last ones. Should an earlier handler have replaced the
	// field, fewer may be left than arrived; never more than the header held.
	return lines[:min(n, len(lines))]
}

// Address parses one forwarded address as core does ("ip", "ip:port", "[ipv6]:port"),
// unmapped and without a zone. The bytes are the request's and are read in place: only
// the parsed address is kept.
func Address(b []byte) (netip.Addr, bool) {
	a, err := netip.ParseAddr(hook.HostOf(strings.TrimSpace(nocopy.String(b))))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Deny runs an application's deny function on a refused request and reports whether it
// answered: returned an error, changed the response's status or body (a body stream,
// never read here, counts), or took the connection over. Otherwise the adapter sends its
// default refusal, not 200 with the rate-limit fields.
func Deny(rc *fasthttp.RequestCtx, deny func() error) (answered bool, err error) {
	r := &rc.Response
	status, body := r.StatusCode(), -1
	if !r.IsBodyStream() {
		body = len(r.Body())
	}
	err = deny()
	return err != nil || r.StatusCode() != status || r.IsBodyStream() || len(r.Body()) != body ||
		rc.Hijacked() || adapter.Closed(rc.Conn()), err
}
