package ginlimit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// Under core.WithCountWhen the limit puts its hijack watch in c.Writer: it must unwrap to
// Gin's writer, so that http.ResponseController still reaches the connection's writer
// (SetWriteDeadline for a streaming handler, SetReadDeadline, EnableFullDuplex), as
// without the limit.
func TestCountWhenKeepsResponseControllerDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []core.Option
	}{
		{"plain", nil},
		{"countwhen", []core.Option{core.WithCountWhen(core.Failed)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gin.New()
			opts := append([]core.Option{core.WithStore(core.NewMemoryStore(nil))}, tc.opts...)
			r.GET("/stream", ginlimit.Limit(10, time.Minute, opts...), func(c *gin.Context) {
				err := http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(time.Minute))
				if err != nil {
					c.String(http.StatusOK, "deadline: %v", err)
					return
				}
				c.String(http.StatusOK, "ok")
			})
			srv := httptest.NewServer(r)
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL + "/stream")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "ok" {
				t.Fatalf("handler behind the limit got %q, want \"ok\" (as without the limit's CountWhen)", body)
			}
		})
	}
}
