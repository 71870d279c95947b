package azqpubsub

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
	"github.com/azqlib/azq/envelope"
	"gocloud.dev/gcerrors"
)

// errorCode maps a back end's error to gocloud's codes: by azq's
// sentinels first, then by the HTTP status that every *azq.Error carries.
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
	case http.StatusServiceUnavailable:
		// ServerBusy: the account's limits.
		return gcerrors.ResourceExhausted
	case http.StatusNotImplemented:
		return gcerrors.Unimplemented
	case http.StatusInternalServerError:
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
