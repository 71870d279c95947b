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
// for a database that cannot be reached, dropped the connection or cannot
// take writes (a standby), which Azure answers when it cannot serve a
// request for now and every Azure SDK retries; OperationTimedOut (500)
// for an operation that the database gave up on at the back end's
// statement or lock timeout, as Azure answers one that did not finish in
// time; InternalError (500) for any other.
const (
	codeServerBusy        azq.ErrorCode = "ServerBusy"
	codeOperationTimedOut azq.ErrorCode = "OperationTimedOut"
	codeInternalError     azq.ErrorCode = "InternalError"
)

// DatabaseError is the error of an operation that the database failed,
// as opposed to one it refused as a queue would (a missing queue or
// message, a stale receipt: those are *azq.Error values that match azq's
// sentinels). It carries an *azq.Error (503 ServerBusy when the database
// could not be reached, dropped the connection or is a standby, which is
// worth a retry; 500 OperationTimedOut when the statement or lock timeout
// ended it; else 500 InternalError), so that azq's REST server and the
// messaging drivers report it as Azure reports its own failures, and it
// unwraps to the driver's error. It matches none of azq's sentinels.
//
// The *azq.Error's message says only what failed ("the database is
// unavailable"), never the driver's words, which name the database's
// user, host or socket: it is what a client may be shown. Error adds the
// driver's error, for the log.
//
// An operation that failed with a dropped connection may have taken
// effect before the connection dropped, as a request to Azure may whose
// answer was lost: a Put may have added its message, a Get hidden its.
// One that the database ended at a timeout, or that it refused, took no
// effect: each operation is one transaction, rolled back. One whose
// commit a synchronous standby did not confirm before the caller's
// context ended (NotReplicated: 500 OperationTimedOut, as Azure answers
// an operation that may or may not have succeeded) took effect on the
// primary, and a failover to the standby may undo it.
type DatabaseError struct {
	// Err is the error as an *azq.Error, with Azure's code and status.
	Err *azq.Error
	// Cause is the driver's error.
	Cause error
}

// Error returns the message and the code, then the driver's error.
func (e *DatabaseError) Error() string { return e.Err.Error() + ": " + e.Cause.Error() }

// Unwrap returns the *azq.Error and the driver's error, for errors.As.
func (e *DatabaseError) Unwrap() []error { return []error{e.Err, e.Cause} }

// Unavailable reports whether the database could not be reached, dropped
// the connection or cannot take writes: worth trying again.
func (e *DatabaseError) Unavailable() bool { return e.Err.Code == codeServerBusy }

// TimedOut reports whether the database ended the operation at the
// statement or lock timeout (Options.StatementTimeout, LockTimeout); it
// took no effect.
func (e *DatabaseError) TimedOut() bool {
	return e.Err.Code == codeOperationTimedOut && !e.NotReplicated()
}

// NotReplicated reports whether the operation committed on the primary
// but its wait for the synchronous standby was canceled, as the caller's
// context ended, before the standby confirmed it (ErrNotReplicated): it
// may have taken effect, and may be lost in a failover.
func (e *DatabaseError) NotReplicated() bool { return errors.Is(e.Cause, ErrNotReplicated) }

// ErrNotReplicated is the cause (DatabaseError.Cause) of the failure of an
// operation whose commit waited for a synchronous standby (the primary's
// synchronous_standby_names) and whose wait was canceled, by the end of
// the caller's context or by the session's termination, before the
// standby confirmed it. PostgreSQL does not roll such a commit back: the
// change is on the primary, and may not be on the standby. The operation
// is reported as failed, never as done, since a failover to the standby
// would lose it; a Put may have added its message, a Delete removed its.
var ErrNotReplicated = errors.New("the commit's wait for the synchronous standby was canceled: the change is committed on the primary, and may not be on the standby")

// errNotReplicated is the error of an operation that met ErrNotReplicated.
func errNotReplicated() error {
	return &DatabaseError{Err: &azq.Error{Code: codeOperationTimedOut, StatusCode: http.StatusInternalServerError,
		Message: "the database did not confirm the operation in time: it may have taken effect"},
		Cause: ErrNotReplicated}
}

// dbError maps an error of the driver: the context's own error when ctx
// ended (as the in-memory queue returns it), else a *DatabaseError.
func dbError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgCode(err) == pgQueryCanceled) {
		// pgQueryCanceled: the statement was canceled as ctx ended (see
		// cancelOnContext); it took no effect.
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
	switch {
	case unavailable(err):
		code, status, what = codeServerBusy, http.StatusServiceUnavailable, "the database is unavailable"
	case readOnly(err):
		code, status, what = codeServerBusy, http.StatusServiceUnavailable, "the database is unavailable for writes"
	case timedOut(err):
		code, status, what = codeOperationTimedOut, http.StatusInternalServerError, "the database did not complete the operation in time"
	}
	return &DatabaseError{Err: &azq.Error{Code: code, StatusCode: status, Message: what}, Cause: err}
}

// SQLSTATE codes the back end tells apart.
const (
	pgQueryCanceled       = "57014" // canceled: by a cancel request or the statement timeout
	pgLockNotAvailable    = "55P03" // the lock timeout
	pgReadOnlyTransaction = "25006" // a standby's answer to a write
	pgFeatureNotSupported = "0A000" // a standby's answer to an unlogged table
	pgWarning             = "01000" // a warning of no class of its own
	pgAdminShutdown       = "57P01" // the session's termination
)

// pgCode returns the SQLSTATE of err, "" if the server did not answer it.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// timedOut reports whether the database ended the statement at the
// statement or lock timeout.
func timedOut(err error) bool {
	c := pgCode(err)
	return c == pgQueryCanceled || c == pgLockNotAvailable
}

// readOnly reports whether err is a standby's refusal of a write: the
// connection reached a server in recovery, which takes none until it is
// promoted.
func readOnly(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == pgReadOnlyTransaction || pe.Code == pgFeatureNotSupported && strings.Contains(pe.Message, "during recovery")
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
