package grpclimit

import (
	"context"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reqlimit/reqlimit/internal/adapter"
)

// httpStatusOf is the HTTP status of each gRPC code, as grpc-gateway's
// runtime.HTTPStatusFromCode maps them, for core.WithCountWhen's rules.
var httpStatusOf = [...]int{
	codes.OK:                 http.StatusOK,                  // 200
	codes.Canceled:           499,                            // the client closed the request
	codes.Unknown:            http.StatusInternalServerError, // 500
	codes.InvalidArgument:    http.StatusBadRequest,          // 400
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,      // 504
	codes.NotFound:           http.StatusNotFound,            // 404
	codes.AlreadyExists:      http.StatusConflict,            // 409
	codes.PermissionDenied:   http.StatusForbidden,           // 403
	codes.ResourceExhausted:  http.StatusTooManyRequests,     // 429
	codes.FailedPrecondition: http.StatusBadRequest,          // 400, not 412
	codes.Aborted:            http.StatusConflict,            // 409
	codes.OutOfRange:         http.StatusBadRequest,          // 400
	codes.Unimplemented:      http.StatusNotImplemented,      // 501
	codes.Internal:           http.StatusInternalServerError, // 500
	codes.Unavailable:        http.StatusServiceUnavailable,  // 503
	codes.DataLoss:           http.StatusInternalServerError, // 500
	codes.Unauthenticated:    http.StatusUnauthorized,        // 401
}

// httpStatus returns the HTTP status of a call whose handler returned err: the status of
// the code the server sends for err (see code).
func httpStatus(err error) int { return statusOf(code(err)) }

// code is the code the server sends for a handler's err: OK for nil, the code of a gRPC
// status error, Canceled or DeadlineExceeded for a context error, and Unknown for any
// other error.
func code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return status.FromContextError(err).Code() // what grpc-go's server sends
}

// statusOf is the HTTP status of c; a code outside the table is 500, as in grpc-gateway.
func statusOf(c codes.Code) int {
	if c < codes.Code(len(httpStatusOf)) {
		return httpStatusOf[c]
	}
	return http.StatusInternalServerError
}

// settleStream settles a stream whose handler ended it with err, having sent the client
// at least one message if sent. A stream that sent nothing is settled by its code, as a
// unary call is. One that sent a message was served, whatever its ending: it counts
// wherever the rule counts OK, so a client cannot take updates and then cancel, or make
// the handler fail, to be served uncounted. Under a rule that does not count OK
// (core.Failed), the client leaving a stream it was served (Canceled, DeadlineExceeded)
// is the end of a served stream and does not count; any other error still does, so a
// login that sends a challenge before it refuses counts its failures.
func settleStream(ctx context.Context, l adapter.Limiter, v adapter.Verdict, err error, sent bool) {
	c := code(err)
	switch {
	case !sent:
		l.Settle(ctx, v, statusOf(c))
	case c == codes.Canceled || c == codes.DeadlineExceeded:
		l.Settle(ctx, v, http.StatusOK)
	case l.Counts(http.StatusOK):
		// Counted as served: the grant stays, and there is nothing to give back.
	default:
		l.Settle(ctx, v, statusOf(c))
	}
}

// countingStream is a stream that records whether it sent the client a message.
type countingStream struct {
	grpc.ServerStream
	sent atomic.Bool
}

// SendMsg records a message sent while the client was there: grpc cancels a stream's
// context a moment before its Sends start to fail, and a message sent in that moment
// never reaches the client.
func (s *countingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil && !s.sent.Load() && s.Context().Err() == nil {
		s.sent.Store(true)
	}
	return err
}
