// Package observe describes what a queue service reports of each request
// it answers: an Observation, with the Outcome that sorts its answer as
// Azure Monitor's ResponseType dimension does.
//
// azq's REST server reports one per request to server.Options.Observe, and
// azqtest.FaultyQueue one per call; package metrics counts them for
// Prometheus (metrics.Recorder.Observe). The types live here, below all
// three, so that the server and the test helpers report observations
// without linking a metrics stack, and any function can take them.
package observe

import "time"

// Outcome is the kind of answer a request got, as Azure Monitor's
// ResponseType dimension sorts them, coarsely.
type Outcome string

// The outcomes of a request.
const (
	// Success: a 1xx, 2xx or 3xx answer.
	Success Outcome = "success"
	// ClientError: a 4xx answer; the request was at fault.
	ClientError Outcome = "client_error"
	// ThrottlingError: 503 ServerBusy (or 429), the answer past a
	// scalability target.
	ThrottlingError Outcome = "throttling_error"
	// ServerError: any other 5xx answer, such as 500 InternalError or
	// OperationTimedOut.
	ServerError Outcome = "server_error"
	// NetworkError: no complete answer; the connection was closed or
	// reset, or the answer cut off. A client that hangs up before its
	// answer (its request's context cancelled) is one: Azure's
	// NetworkError is "most commonly" a client that closes the connection
	// before its timeout expires. It is never a ServerError.
	NetworkError Outcome = "network_error"
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{Success, ClientError, ThrottlingError, ServerError, NetworkError}

// The statuses OutcomeOf tells apart, as numbers: the package links no
// HTTP stack for them.
const (
	statusTooManyRequests    = 429
	statusServiceUnavailable = 503
)

// OutcomeOf sorts an answer: its HTTP status and Azure error code, or a
// failed connection.
func OutcomeOf(status int, code string, network bool) Outcome {
	switch {
	case network:
		return NetworkError
	case status == statusServiceUnavailable && (code == "ServerBusy" || code == ""), status == statusTooManyRequests:
		return ThrottlingError
	case status >= 500:
		return ServerError
	case status >= 400:
		return ClientError
	}
	return Success
}

// Observation describes one request to a queue service, once it is
// answered: azq's REST server reports one per request to
// server.Options.Observe, and azqtest.FaultyQueue one per call.
type Observation struct {
	// Account and Queue are the account and queue the request addressed;
	// Queue is empty for service operations and for requests whose queue
	// name was not valid.
	Account, Queue string
	// Operation is Azure's name for the operation, as in
	// faults.Operations ("PutMessage"), or "UnknownOperation" for a
	// request that named none.
	Operation string
	// Status and ErrorCode are the answer's HTTP status and Azure error
	// code ("" on success); Status is 0 when no answer was sent.
	Status    int
	ErrorCode string
	// Outcome sorts the answer.
	Outcome Outcome
	// Duration is the time from the request's arrival to its answer.
	Duration time.Duration
	// Applied is set when the operation took effect although its answer
	// was an injected failure (faults.Then.Applied).
	Applied bool
	// Fault names the fault rule that decided the answer, or
	// faults.ThrottleRule; empty when none did.
	Fault string
}

// TookEffect reports whether the operation changed what it addresses:
// it succeeded, or it was applied before its answer was lost.
func (o *Observation) TookEffect() bool { return o.Outcome == Success || o.Applied }
