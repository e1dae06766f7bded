package fastheader_test

import (
	"bufio"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/reqlimit/reqlimit/internal/fastheader"
)

func lines(b [][]byte) []string {
	out := make([]string, len(b))
	for i, l := range b {
		out[i] = string(l)
	}
	return out
}

// A chunked request's trailer adds lines to the header fasthttp parsed; Lines reads only
// the header's own, whatever the case of their names.
func TestLinesLeaveTheTrailerOut(t *testing.T) {
	for _, c := range []struct {
		header, trailer string
		want            []string
	}{
		{"Forwarded: for=192.0.2.1\r\nforwarded: for=192.0.2.2\r\n", "Forwarded: for=198.51.100.1\r\n", []string{"for=192.0.2.1", "for=192.0.2.2"}},
		{"CF-Connecting-IP: 192.0.2.1\r\n", "cf-connecting-ip: 198.51.100.1\r\nCF-Connecting-IP: 198.51.100.2\r\n", []string{"192.0.2.1"}},
		{"", "CF-Connecting-IP: 198.51.100.1\r\n", []string{}},
		{"CF-Connecting-IP: 192.0.2.1\r\n", "", []string{"192.0.2.1"}},
	} {
		name := strings.SplitN(c.header+c.trailer, ":", 2)[0]
		raw := "POST /t HTTP/1.1\r\nHost: app\r\n" + c.header + "Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n" + c.trailer + "\r\n"
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if all := req.Header.PeekAll(name); len(all) != strings.Count(strings.ToLower(c.header+c.trailer), strings.ToLower(name)+":") {
			t.Fatalf("%q: fasthttp's header holds %q: the trailer no longer joins it, and this test no longer tests", raw, lines(all))
		}
		if got := lines(fastheader.Lines(&req.Header, name)); !slices.Equal(got, c.want) {
			t.Errorf("%q: Lines(%s) = %q, want %q", raw, name, got, c.want)
		}
	}
}

// A header built in code was never parsed: it has no trailer, and all its lines count.
func TestLinesOfABuiltHeader(t *testing.T) {
	var h fasthttp.RequestHeader
	h.Add("Forwarded", "for=192.0.2.1")
	h.Add("Forwarded", "for=192.0.2.2")
	if got := lines(fastheader.Lines(&h, "Forwarded")); !slices.Equal(got, []string{"for=192.0.2.1", "for=192.0.2.2"}) {
		t.Errorf("Lines = %q", got)
	}
}
