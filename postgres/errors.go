package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/azqlib/azq"
	"github.com/jackc/pgx/v5/pgconn"
)

// The Azure error codes of a failure of the database: ServerBusy (503)
// for a database that cannot be reached or that dropped the connection,
// which Azure answers when it cannot serve a request for now and every
// Azure SDK retries; InternalError (500) for any other.
const (
	codeServerBusy    azq.ErrorCode = "ServerBusy"
	codeInternalError azq.ErrorCode = "InternalError"
)

// DatabaseError is the error of an operation that the database failed,
// as opposed to one it refused as a queue would (a missing queue or
// message, a stale receipt: those are *azq.Error values that match azq's
// sentinels). It carries an *azq.Error (503 ServerBusy when the database
// could not be reached or dropped the connection, which is worth a retry;
// else 500 InternalError), so that azq's REST server and the messaging
// drivers report it as Azure reports its own failures, and it unwraps to
// the driver's error. It matches none of azq's sentinels.
//
// An operation that failed with a dropped connection may have taken
// effect before the connection dropped, as a request to Azure may whose
// answer was lost: a Put may have added its message, a Get hidden its.
type DatabaseError struct {
	// Err is the error as an *azq.Error, with Azure's code and status.
	Err *azq.Error
	// Cause is the driver's error.
	Cause error
}

// Error returns the message, with the driver's error and the code.
func (e *DatabaseError) Error() string { return e.Err.Error() }

// Unwrap returns the *azq.Error and the driver's error, for errors.As.
func (e *DatabaseError) Unwrap() []error { return []error{e.Err, e.Cause} }

// Unavailable reports whether the database could not be reached or
// dropped the connection: worth trying again.
func (e *DatabaseError) Unavailable() bool { return e.Err.Code == codeServerBusy }

// dbError maps an error of the driver: the context's own error when ctx
// ended (as the in-memory queue returns it), else a *DatabaseError.
func dbError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)) {
		return ctx.Err()
	}
	var de *DatabaseError
	if errors.As(err, &de) {
		return err
	}
	var ae *azq.Error
	if errors.As(err, &ae) {
		return err // an answer of ours, passed through
	}
	code, status, what := codeInternalError, http.StatusInternalServerError, "the database failed the operation"
	if unavailable(err) {
		code, status, what = codeServerBusy, http.StatusServiceUnavailable, "the database is unavailable"
	}
	return &DatabaseError{Err: &azq.Error{Code: code, StatusCode: status, Message: what + ": " + err.Error()}, Cause: err}
}

// unavailable reports whether err says that the database could not be
// reached, dropped the connection, or is shutting down or starting.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", // admin_shutdown
			pe.Code == "57P02", // crash_shutdown
			pe.Code == "57P03", // cannot_connect_now
			pe.Code == "53300", // too_many_connections
			pe.Code == "40001", // serialization_failure
			pe.Code == "40P01": // deadlock_detected
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "closed pool")
}

// Errors that the database does not make but the back end answers with,
// as the in-memory queue does.

func queueNotFound(name string) error {
	return &azq.Error{Code: azq.CodeQueueNotFound, StatusCode: http.StatusNotFound,
		Message: "the queue " + quoteTrunc(name) + " does not exist"}
}

func messageNotFound(id azq.MessageID) error {
	return &azq.Error{Code: azq.CodeMessageNotFound, StatusCode: http.StatusNotFound,
		Message: "the message " + id.String() + " does not exist, or the pop receipt is no longer its current one"}
}

func queueAlreadyExists(name string) error {
	return &azq.Error{Code: azq.CodeQueueAlreadyExists, StatusCode: http.StatusConflict,
		Message: "the queue " + quoteTrunc(name) + " already exists with different metadata"}
}

// errZeroReceipt answers a zero PopReceipt, which no back end issues: the
// caller forgot to pass the receipt. As in memory, Azure's missing
// required parameter.
var errZeroReceipt = &azq.Error{Code: "MissingRequiredQueryParameter", StatusCode: http.StatusBadRequest,
	Message: "a pop receipt is required", Details: []azq.Detail{{Name: "QueryParameterName", Value: "popreceipt"}}}

// errClosed answers operations on a closed Service, as a closed in-memory
// Service answers them.
var errClosed = &azq.Error{Code: azq.CodeQueueNotFound, StatusCode: http.StatusNotFound, Message: "the service is closed"}

// quoteTrunc quotes s for an error message, cut short if it is long, so
// that hostile input cannot blow up error text.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + s + `"`
}
