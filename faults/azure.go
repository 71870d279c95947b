package faults

import (
	"net/http"

	"github.com/azqlib/azq"
)

// Operations are the Queue service's operations as a rule names them,
// spelled as Azure's REST reference and its logs spell them.
var Operations = []string{
	"ListQueues",
	"GetServiceProperties",
	"SetServiceProperties",
	"GetServiceStats",
	"CreateQueue",
	"DeleteQueue",
	"GetQueueMetadata",
	"SetQueueMetadata",
	"GetQueueACL",
	"SetQueueACL",
	"PutMessage",
	"GetMessages",
	"PeekMessages",
	"DeleteMessage",
	"ClearMessages",
	"UpdateMessage",
}

// The error codes Azure answers with on a bad day.
const (
	// CodeServerBusy (503): a queue or the account is past its
	// scalability targets, or the partition serving it is busy.
	CodeServerBusy = "ServerBusy"
	// CodeInternalError (500): the service failed.
	CodeInternalError = "InternalError"
	// CodeOperationTimedOut (500): the operation did not finish in the
	// time the service allows it; it may or may not have taken effect.
	CodeOperationTimedOut = "OperationTimedOut"
)

// Reason says why Azure answers 503 ServerBusy; each has its own message.
type Reason string

// Azure's reasons for ServerBusy.
const (
	// ReasonBusy: the partition serving the queue is busy, as when one
	// queue is past its target of 2,000 messages a second.
	ReasonBusy Reason = "busy"
	// ReasonOperations: the account is past its target of 20,000
	// requests a second.
	ReasonOperations Reason = "operations"
	// ReasonIngress: the account is past its ingress bandwidth target.
	ReasonIngress Reason = "ingress"
	// ReasonEgress: the account is past its egress bandwidth target.
	ReasonEgress Reason = "egress"
)

// Reasons lists every Reason, ReasonBusy (the default) first.
var Reasons = []Reason{ReasonBusy, ReasonOperations, ReasonIngress, ReasonEgress}

// Message returns Azure's message for a ServerBusy answer with reason r.
func (r Reason) Message() string {
	switch r {
	case ReasonOperations:
		return "Operations per second is over the account limit."
	case ReasonIngress:
		return "Ingress is over the account limit."
	case ReasonEgress:
		return "Egress is over the account limit."
	}
	return "The server is currently unable to receive requests. Please retry your request."
}

// badDay holds the status and message of the codes this package knows:
// the ones Azure answers with when it, not the request, is at fault.
var badDay = map[string]struct {
	status  int
	message string
}{
	CodeServerBusy:        {http.StatusServiceUnavailable, ReasonBusy.Message()},
	CodeInternalError:     {http.StatusInternalServerError, "Server encountered an internal error. Please try again after some time."},
	CodeOperationTimedOut: {http.StatusInternalServerError, "The operation could not be completed within the permitted time."},
}

// ServerBusy returns Azure's 503 ServerBusy error with the message of
// reason.
func ServerBusy(reason Reason) *azq.Error {
	return &azq.Error{Code: CodeServerBusy, StatusCode: http.StatusServiceUnavailable, Message: reason.Message()}
}
