package otellimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
	"github.com/reqlimit/reqlimit/otellimit"
)

// A route limited to 3 a minute, its decisions read back through a ManualReader; an
// application gives its provider a periodic reader and an exporter instead.
func Example() {
	reader := sdkmetric.NewManualReader()
	m := otellimit.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))) // or nil, for otel.GetMeterProvider()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	// A store of its own, so that the example starts empty every run; an app leaves it out.
	store := core.WithStore(core.NewMemoryStore(nil))

	mux := http.NewServeMux()
	mux.Handle("GET /user/{id}", nethttp.Limit(3, time.Minute, m.Option(), store)(hello))

	for range 5 {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/user/1", nil))
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	var lines []string
	for _, metric := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := metric.Data.(metricdata.Sum[int64]); ok {
			for _, dp := range sum.DataPoints {
				lines = append(lines, fmt.Sprintf("%s %s{%s} %d", metric.Name, metric.Unit, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value))
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// reqlimit.requests {request}{reqlimit.policy=3/1m,reqlimit.result=admitted,reqlimit.scope=GET /user/{id}} 3
	// reqlimit.requests {request}{reqlimit.policy=3/1m,reqlimit.result=refused,reqlimit.scope=GET /user/{id}} 2
}
