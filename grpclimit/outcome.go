package grpclimit

import (
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// the code the server sends for err, which is OK for nil, the code of a gRPC status error,
// Canceled or DeadlineExceeded for a context error, and Unknown for any other error. A code
// outside the table is 500, as in grpc-gateway.
func httpStatus(err error) int {
	code := codes.OK
	if err != nil {
		if st, ok := status.FromError(err); ok {
			code = st.Code()
		} else {
			code = status.FromContextError(err).Code() // what grpc-go's server sends
		}
	}
	if code < codes.Code(len(httpStatusOf)) {
		return httpStatusOf[code]
	}
	return http.StatusInternalServerError
}
