package azq

import (
	"strings"
)

// ErrorCode is an Azure Storage error code, such as "MessageNotFound". The
// REST front end sends it unchanged in the x-ms-error-code header and the
// Error XML, so code that matches on Azure's codes works against azq too.
type ErrorCode string

// Error codes that azq produces. The names and HTTP statuses are Azure's
// (Queue Service Error Codes and Common REST API Error Codes).
const (
	CodeMessageNotFound               ErrorCode = "MessageNotFound"
	CodeQueueNotFound                 ErrorCode = "QueueNotFound"
	CodeQueueAlreadyExists            ErrorCode = "QueueAlreadyExists"
	CodeRequestBodyTooLarge           ErrorCode = "RequestBodyTooLarge"
	CodeOutOfRangeQueryParameterValue ErrorCode = "OutOfRangeQueryParameterValue"
	CodeInvalidQueryParameterValue    ErrorCode = "InvalidQueryParameterValue"
	CodeOutOfRangeInput               ErrorCode = "OutOfRangeInput"
	CodeInvalidResourceName           ErrorCode = "InvalidResourceName"
	CodeInvalidMetadata               ErrorCode = "InvalidMetadata"
	CodeEmptyMetadataKey              ErrorCode = "EmptyMetadataKey"
	CodeMetadataTooLarge              ErrorCode = "MetadataTooLarge"
	CodeInvalidMarker                 ErrorCode = "InvalidMarker"
	CodeInvalidXMLDocument            ErrorCode = "InvalidXmlDocument"
	CodeInvalidInput                  ErrorCode = "InvalidInput"
)

// Error codes that azq itself never produces but a remote queue service
// may answer with; the sentinels below match them too.
const (
	// CodePopReceiptMismatch is Azurite's answer (400) for a pop receipt
	// that is not the message's current one, where Azure answers
	// MessageNotFound. It matches ErrMessageNotFound.
	CodePopReceiptMismatch ErrorCode = "PopReceiptMismatch"
	// CodeMessageTooLarge is the documented (400) code for an oversized
	// message; the service answers RequestBodyTooLarge in practice. It
	// matches ErrMessageTooLarge.
	CodeMessageTooLarge ErrorCode = "MessageTooLarge"
	// CodeQueueBeingDeleted (409) answers an operation on a queue that
	// is being deleted, for a while after Delete Queue. It matches no
	// sentinel: the queue is neither there nor creatable yet.
	CodeQueueBeingDeleted ErrorCode = "QueueBeingDeleted"
	// CodeQueueDisabled (409) answers an operation on a queue disabled
	// by the administrator. It matches no sentinel.
	CodeQueueDisabled ErrorCode = "QueueDisabled"
)

// Detail is one extra element of an Azure error response, such as
// QueryParameterName or MaxLimit. Details keep their order so that the
// REST front end writes them as the service does.
type Detail struct {
	Name  string
	Value string
}

// Error is the error type of every failed azq operation. It carries the
// Azure error code and HTTP status of the failure, so that callers can match
// on either and the REST front end can answer without a table of its own.
//
// Compare errors with errors.Is against the Err… values of this package:
// errors.Is(err, azq.ErrMessageNotFound) is true for every Error that
// reports a missing message, whatever its message text or details.
//
// An Error built outside this package, such as a client of a remote queue
// service builds from a REST response, matches the same sentinels by its
// Code (and, for codes azq does not know, its StatusCode): an Error with
// Code "MessageNotFound" or "PopReceiptMismatch" is ErrMessageNotFound,
// one with Code "QueueNotFound" is ErrQueueNotFound, and any other 400 is
// ErrInvalidArgument (ErrInvalidPopReceipt when its QueryParameterName
// detail is popreceipt). So code that checks errors.Is works the same against
// every back end.
type Error struct {
	// Code is the Azure error code, e.g. CodeMessageNotFound.
	Code ErrorCode
	// StatusCode is the HTTP status Azure answers with, e.g. 404.
	StatusCode int
	// Message is a human-readable description.
	Message string
	// Details are Azure's extra error elements, e.g. QueryParameterName.
	Details []Detail

	// cause is the error of a lower layer that this one reports, such as
	// the file system's error behind ErrStorageFailure; nil if none.
	cause error

	// kind is the sentinel this error is an instance of, if any. Is walks
	// the chain, so an invalid pop receipt is both ErrInvalidPopReceipt
	// and, more generally, ErrInvalidArgument. An Error built outside the
	// package has none; Is derives it from the code instead (kindOf).
	kind *Error
}

// Error returns the message followed by the Azure error code.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("azq: ")
	b.WriteString(e.Message)
	b.WriteString(" (")
	b.WriteString(string(e.Code))
	b.WriteString(")")
	return b.String()
}

// Is reports whether target is e or one of the sentinel errors e is an
// instance of. It makes errors.Is(err, azq.ErrMessageNotFound) work.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if e == t {
		return true
	}
	for k := e.kindOf(); k != nil; k = k.kind {
		if k == t {
			return true
		}
	}
	return false
}

// kindOf returns the sentinel e is an instance of: the one it was made
// from, or for an Error built outside the package, the one its code
// (else its status) names. A sentinel without a kind of its own names
// itself this way, which ends the walk in Is as well.
func (e *Error) kindOf() *Error {
	if e.kind != nil {
		return e.kind
	}
	k, ok := kindByCode[e.Code]
	if !ok && e.StatusCode == 400 {
		k = ErrInvalidArgument
	}
	if k == ErrInvalidArgument {
		// A missing or malformed receipt, whatever code the service
		// gives it (InvalidQueryParameterValue, MissingRequiredQueryParameter).
		if p, _ := e.Detail("QueryParameterName"); strings.EqualFold(p, "popreceipt") {
			return ErrInvalidPopReceipt
		}
	}
	return k
}

// Unwrap returns the error of a lower layer that e reports, such as the
// file system's error behind ErrStorageFailure, or nil.
func (e *Error) Unwrap() error { return e.cause }

// Detail returns the value of the named detail element and whether it is
// present.
func (e *Error) Detail(name string) (string, bool) {
	for _, d := range e.Details {
		if d.Name == name {
			return d.Value, true
		}
	}
	return "", false
}

// newError returns an instance of the sentinel kind with its own message and
// details. The code and status are the sentinel's unless code is non-empty.
func newError(kind *Error, code ErrorCode, msg string, details ...Detail) *Error {
	e := &Error{Code: kind.Code, StatusCode: kind.StatusCode, Message: msg, Details: details, kind: kind}
	if code != "" {
		e.Code = code
	}
	return e
}

// The sentinel errors of azq. Every error an operation returns is an *Error
// that matches exactly one of these with errors.Is (plus ErrInvalidArgument
// for the more specific argument errors).
var (
	// ErrMessageNotFound: the message does not exist, has expired, or the
	// pop receipt is no longer its current one (the message was dequeued
	// again, updated or deleted since the receipt was issued). 404.
	ErrMessageNotFound = &Error{Code: CodeMessageNotFound, StatusCode: 404,
		Message: "the specified message does not exist"}

	// ErrQueueNotFound: the queue does not exist, was deleted or closed. 404.
	ErrQueueNotFound = &Error{Code: CodeQueueNotFound, StatusCode: 404,
		Message: "the specified queue does not exist"}

	// ErrQueueAlreadyExists: CreateQueue found a queue of that name with
	// different metadata. 409.
	ErrQueueAlreadyExists = &Error{Code: CodeQueueAlreadyExists, StatusCode: 409,
		Message: "the specified queue already exists"}

	// ErrMessageTooLarge: the message content exceeds the size limit
	// (65,536 bytes by default). Azure reports this as RequestBodyTooLarge,
	// 413, with a MaxLimit detail, and so does azq.
	ErrMessageTooLarge = &Error{Code: CodeRequestBodyTooLarge, StatusCode: 413,
		Message: "the message content exceeds the maximum allowed size"}

	// ErrInvalidArgument: an argument is malformed or inconsistent with
	// another (for example a visibility timeout not shorter than the
	// time-to-live). Azure's InvalidQueryParameterValue, 400.
	ErrInvalidArgument = &Error{Code: CodeInvalidQueryParameterValue, StatusCode: 400,
		Message: "an argument is invalid"}

	// ErrOutOfRange: a numeric argument is outside its allowed range; the
	// details name the parameter and its bounds. Azure's
	// OutOfRangeQueryParameterValue, 400.
	ErrOutOfRange = &Error{Code: CodeOutOfRangeQueryParameterValue, StatusCode: 400,
		Message: "an argument is out of range", kind: ErrInvalidArgument}

	// ErrInvalidPopReceipt: the pop receipt is not one azq could have
	// issued (garbage, truncated or forged). A well-formed receipt that is
	// merely stale gives ErrMessageNotFound instead, as Azure does.
	// InvalidQueryParameterValue, 400, Reason "Invalid pop receipt format".
	ErrInvalidPopReceipt = &Error{Code: CodeInvalidQueryParameterValue, StatusCode: 400,
		Message: "the pop receipt is not valid", kind: ErrInvalidArgument}

	// ErrInvalidQueueName: the queue name breaks Azure's naming rules.
	// InvalidResourceName (bad characters) or OutOfRangeInput (length), 400.
	ErrInvalidQueueName = &Error{Code: CodeInvalidResourceName, StatusCode: 400,
		Message: "the specified resource name contains invalid characters", kind: ErrInvalidArgument}

	// ErrInvalidMetadata: metadata breaks Azure's rules. InvalidMetadata,
	// EmptyMetadataKey or MetadataTooLarge, 400.
	ErrInvalidMetadata = &Error{Code: CodeInvalidMetadata, StatusCode: 400,
		Message: "the metadata specified is invalid", kind: ErrInvalidArgument}

	// ErrInvalidMarker: the ListQueues marker was not produced by azq.
	// InvalidMarker, 400.
	ErrInvalidMarker = &Error{Code: CodeInvalidMarker, StatusCode: 400,
		Message: "the specified marker is invalid", kind: ErrInvalidArgument}

	// ErrInvalidAccessPolicy: a stored access policy breaks Azure's rules
	// (more than five, an identifier longer than 64 characters, or a
	// permission outside "raup"). InvalidXmlDocument, 400, as Azure reports
	// it for the ACL body.
	ErrInvalidAccessPolicy = &Error{Code: CodeInvalidXMLDocument, StatusCode: 400,
		Message: "the access policy is invalid", kind: ErrInvalidArgument}
)

// kindByCode maps the Azure error codes a queue service answers with to
// the sentinel an Error with that code matches. Codes the core produces
// map to the sentinel it produces them for; the rest are the codes a
// remote service or an emulator uses for the same conditions. A code not
// listed here matches by status: any other 400 is ErrInvalidArgument.
//
// OutOfRangeInput and InvalidXmlDocument stay generic (ErrInvalidArgument):
// a remote service uses them for more than the queue-name length and the
// ACL body that azq uses them for.
var kindByCode = map[ErrorCode]*Error{
	CodeMessageNotFound:               ErrMessageNotFound,
	CodePopReceiptMismatch:            ErrMessageNotFound,
	CodeQueueNotFound:                 ErrQueueNotFound,
	CodeQueueAlreadyExists:            ErrQueueAlreadyExists,
	CodeRequestBodyTooLarge:           ErrMessageTooLarge,
	CodeMessageTooLarge:               ErrMessageTooLarge,
	CodeInvalidQueryParameterValue:    ErrInvalidArgument,
	CodeOutOfRangeQueryParameterValue: ErrOutOfRange,
	CodeInvalidResourceName:           ErrInvalidQueueName,
	CodeInvalidMetadata:               ErrInvalidMetadata,
	CodeEmptyMetadataKey:              ErrInvalidMetadata,
	CodeMetadataTooLarge:              ErrInvalidMetadata,
	CodeInvalidMarker:                 ErrInvalidMarker,
}
