package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestKind(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		// The Redis store's error when Redis is down: the refusals, then its deadline.
		{"refused until the deadline", fmt.Errorf("redisstore: decide: %w (gave up at the 100ms deadline: %w)", refused, context.DeadlineExceeded), KindConnection},
		{"refused", refused, KindConnection},
		{"reset", fmt.Errorf("x: %w", syscall.ECONNRESET), KindConnection},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), KindTimeout},
		{"read timeout", readTimeout, KindTimeout},
		{"canceled", fmt.Errorf("request ended: %w", context.Canceled), KindCanceled},
		// A network operation that failed for a reason not listed is still the connection's.
		{"unreachable", fmt.Errorf("x: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}), KindConnection},
		{"read error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("corrupt frame")}, KindConnection},
		{"other", errors.New("ERR unknown command"), KindOther},
	} {
		if got := Kind(c.err); got != c.want {
			t.Errorf("%s: Kind(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}
