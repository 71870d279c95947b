package azqpubsub

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/envelope"
	"github.com/azqlib/azq/internal/transient"
	"gocloud.dev/gcerrors"
)

// isRetryable reports whether the portable type should make a failed
// call again: for the failures that may pass (package transient's list:
// 408, 429, 500, 502, 503 and 504 answers but a durable Service's storage
// failure, failed connections, timeouts). gocloud retries them with its
// back-off, on the real clock, until the call succeeds or the topic or
// subscription is shut down; any other error ends the call, and a
// subscription's Receive returns it from then on.
func isRetryable(err error) bool { return transient.Is(err) }

// errorCode maps a back end's error to gocloud's codes: by azq's
// sentinels first, then by the HTTP status that every *azq.Error carries.
// Of the retryable errors, ServerBusy and 429 are ResourceExhausted, 500
// and 502 Internal, 408 and 504 and network timeouts DeadlineExceeded,
// and a connection that failed otherwise Unknown.
func errorCode(err error) gcerrors.ErrorCode {
	switch {
	case errors.Is(err, context.Canceled):
		return gcerrors.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return gcerrors.DeadlineExceeded
	case errors.Is(err, errNoQueues):
		return gcerrors.FailedPrecondition
	case errors.Is(err, envelope.ErrInvalidUTF8):
		return gcerrors.InvalidArgument
	case errors.Is(err, azq.ErrQueueNotFound), errors.Is(err, azq.ErrMessageNotFound):
		return gcerrors.NotFound
	case errors.Is(err, azq.ErrQueueAlreadyExists):
		return gcerrors.AlreadyExists
	}
	var tooLarge *azure.ResponseTooLargeError
	if errors.As(err, &tooLarge) {
		return gcerrors.Internal
	}
	var ae *azq.Error
	if !errors.As(err, &ae) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return gcerrors.DeadlineExceeded
		}
		return gcerrors.Unknown
	}
	switch ae.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return gcerrors.InvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return gcerrors.PermissionDenied
	case http.StatusNotFound:
		return gcerrors.NotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		// QueueBeingDeleted, QueueDisabled: the queue exists but cannot
		// take the operation now.
		return gcerrors.FailedPrecondition
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		// ServerBusy: the account's limits.
		return gcerrors.ResourceExhausted
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return gcerrors.DeadlineExceeded
	case http.StatusNotImplemented:
		return gcerrors.Unimplemented
	case http.StatusInternalServerError, http.StatusBadGateway:
		return gcerrors.Internal
	}
	return gcerrors.Unknown
}

// errorAs sets what i points to to the error of its type in err's chain:
// **azq.Error (every error a back end answered), **azcore.ResponseError
// (the raw answer, from package azure) and **azure.ResponseTooLargeError.
func errorAs(err error, i any) bool {
	switch p := i.(type) {
	case **azq.Error:
		return errors.As(err, p)
	case **azcore.ResponseError:
		return errors.As(err, p)
	case **azure.ResponseTooLargeError:
		return errors.As(err, p)
	}
	return false
}
