package grpclimit_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/reqlimit/reqlimit/grpclimit"
)

// A misspelled name matches no call: its method falls to a broader entry, or has no
// limit at all. Verify, given what the server registered, names each such entry and what
// the server has instead; entries that match pass.
func TestVerifyNamesEntriesTheServerLacks(t *testing.T) {
	ic := grpclimit.Must(map[string]string{
		"/grpc.health.v1.Health/Chek":         "1/1m", // misspelled method
		"grpc.testing.TestServic":             "1/1m", // misspelled service
		"/grpc.testing.Missing/Call":          "1/1m", // method of a service never registered
		"/grpc.testing.TestService/EmptyCall": "1/1m",
		"grpc.health.v1.Health":               "5/1m",
	}, fresh())
	conn := limited(t, ic)
	// The misspelled method's target is decided by the service entry (5/1m), not 1/1m.
	expect(t, conn, check, codes.OK, codes.OK, codes.OK)

	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, &healthService{})
	testpb.RegisterTestServiceServer(s, testService{})
	err := ic.Verify(s.GetServiceInfo())
	if err == nil {
		t.Fatal("Verify: nil, want the three entries the server lacks")
	}
	msg := err.Error()
	for _, want := range []string{
		`"/grpc.health.v1.Health/Chek": service grpc.health.v1.Health has no method Chek (it has Check, List, Watch)`,
		`"grpc.testing.TestServic": the server has no service grpc.testing.TestServic (it has grpc.health.v1.Health, grpc.testing.TestService)`,
		`"/grpc.testing.Missing/Call": the server has no service grpc.testing.Missing`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Verify's error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n != 3 {
		t.Errorf("Verify's error has %d lines, want 3 (the matching entries pass):\n%s", n, msg)
	}

	good := grpclimit.Must(map[string]string{"*": "1/1m", emptyCall: "1/1m", "grpc.health.v1.Health": "1/1m"}, fresh())
	if err := good.Verify(s.GetServiceInfo()); err != nil {
		t.Errorf("Verify of entries the server has: %v", err)
	}
}
