// Package transient tells the failures of a queue request that may pass
// if the request is made again from those that will not, for the
// messaging drivers that retry requests (the gocloud.dev/pubsub driver
// through its portable type, the Watermill subscriber itself).
//
// Transient are the service's own bad days and a failed connection:
//
//   - an answer of 408 (request timeout), 429 (too many requests), 500
//     (InternalError, OperationTimedOut), 502, 503 (ServerBusy) or 504;
//   - a connection refused, reset, aborted or closed before or while the
//     answer came (io.EOF, io.ErrUnexpectedEOF, any *net.OpError but a
//     name that does not resolve), and a network timeout;
//   - context.DeadlineExceeded, which is how a try that ran out of its own
//     time (package azure's per-try timeout) ends: a caller whose own
//     context ended stops retrying on that context anyway.
//
// Everything else is not: an answer of any other status (a 4xx: the queue
// missing, the credentials refused, the message too large, an argument
// invalid; 501), a durable Service's azq.ErrStorageFailure (a 500 that
// every later request repeats, until the Service is opened again),
// context.Canceled, a response too large to read, and any error this
// package does not know, since retrying an error that never passes would
// hide it behind a retry loop for good.
package transient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/azqlib/azq"
)

// statuses are the HTTP statuses of the answers that may pass.
var statuses = map[int]bool{
	http.StatusRequestTimeout:      true,
	http.StatusTooManyRequests:     true,
	http.StatusInternalServerError: true,
	http.StatusBadGateway:          true,
	http.StatusServiceUnavailable:  true,
	http.StatusGatewayTimeout:      true,
}

// connectionErrors are the system's errors of a connection that failed.
var connectionErrors = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT,
	io.EOF, io.ErrUnexpectedEOF,
}

// Is reports whether err is a transient failure of a request.
func Is(err error) bool {
	if err == nil {
		return false
	}
	// An answer: by its status.
	var ae *azq.Error
	if errors.As(err, &ae) {
		return statuses[ae.StatusCode] && !errors.Is(err, azq.ErrStorageFailure)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	for _, target := range connectionErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	// A name that does not resolve stays so, unless the resolver timed
	// out or failed for the moment.
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.IsTimeout || de.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}
