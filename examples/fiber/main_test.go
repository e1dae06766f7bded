package main

import (
	"net/http/httptest"
	"testing"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

func TestLimits(t *testing.T) {
	app := newApp()
	// app.Test runs the app in-process, over an in-memory connection.
	exampletest.Check(t, func(t *testing.T, path string, header ...string) (int, string) {
		r := httptest.NewRequest("GET", path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		resp, err := app.Test(r, -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	})
}
