package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/internal/exampletest"
)

// exported is the part of stdoutmetric's JSON the test reads.
type exported struct {
	ScopeMetrics []struct {
		Metrics []struct {
			Name, Unit string
			Data       struct {
				DataPoints []struct {
					Attributes []struct {
						Key   string
						Value struct{ Value any }
					}
					Value float64
				}
			}
		}
	}
}

// TestExportShowsTheDecisions runs the app on a loopback server, stops its provider and
// reads what the exporter printed. The counts are checked against the statuses the client
// saw: the limits count in the process-wide default store, which a repeated run
// (go test -count=2) finds already full for 127.0.0.1.
func TestExportShowsTheDecisions(t *testing.T) {
	var out bytes.Buffer
	mux, mp, err := newApp(&out, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) int {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	seen := map[int]int{}
	for range 4 {
		seen[get("/user/test")]++
	}
	if seen[429] == 0 || seen[200]+seen[429] != 4 {
		t.Fatalf("statuses %v for 4 requests to a 3/1m route", seen)
	}
	get("/search")
	if err := mp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	got := map[string]float64{}
	for dec := json.NewDecoder(&out); ; {
		var rm exported
		if err := dec.Decode(&rm); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%v in:\n%s", err, out.String())
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, dp := range m.Data.DataPoints {
					var attrs []string
					for _, a := range dp.Attributes {
						attrs = append(attrs, fmt.Sprintf("%s=%v", a.Key, a.Value.Value))
					}
					got[m.Name+" "+m.Unit+" "+strings.Join(attrs, ",")] = dp.Value
				}
			}
		}
	}
	want := map[string]float64{
		"reqlimit.requests {request} reqlimit.policy=3/1m,reqlimit.result=refused,reqlimit.scope=GET /user/test":     float64(seen[429]),
		"reqlimit.requests {request} reqlimit.policy=5/1s,20/1m,reqlimit.result=admitted,reqlimit.scope=GET /search": 1,
	}
	if seen[200] > 0 {
		want["reqlimit.requests {request} reqlimit.policy=3/1m,reqlimit.result=admitted,reqlimit.scope=GET /user/test"] = float64(seen[200])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exported %v, want %v", got, want)
	}
}

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }
