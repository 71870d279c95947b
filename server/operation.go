package server

// operation identifies one REST operation of the Queue service. The handler
// classifies every request into one of these before authorizing it, because
// what a SAS may do and what the read-only secondary endpoint allows are
// decided per operation, not per HTTP verb.
type operation int

// The operations of the Queue service REST API.
const (
	opListQueues operation = iota + 1
	opGetServiceProperties
	opSetServiceProperties
	opGetServiceStats
	opPreflight // CORS OPTIONS: never authenticated
	opCreateQueue
	opDeleteQueue
	opGetQueueMetadata // GET or HEAD ?comp=metadata
	opSetQueueMetadata
	opGetQueueACL
	opSetQueueACL
	opPutMessage
	opGetMessages
	opPeekMessages
	opDeleteMessage
	opClearMessages
	opUpdateMessage
)

var operationNames = [...]string{
	opListQueues:           "ListQueues",
	opGetServiceProperties: "GetServiceProperties",
	opSetServiceProperties: "SetServiceProperties",
	opGetServiceStats:      "GetServiceStats",
	opPreflight:            "Preflight",
	opCreateQueue:          "CreateQueue",
	opDeleteQueue:          "DeleteQueue",
	opGetQueueMetadata:     "GetQueueMetadata",
	opSetQueueMetadata:     "SetQueueMetadata",
	opGetQueueACL:          "GetQueueACL",
	opSetQueueACL:          "SetQueueACL",
	opPutMessage:           "PutMessage",
	opGetMessages:          "GetMessages",
	opPeekMessages:         "PeekMessages",
	opDeleteMessage:        "DeleteMessage",
	opClearMessages:        "ClearMessages",
	opUpdateMessage:        "UpdateMessage",
}

// String returns the operation's name as Azure's documentation spells it,
// e.g. "PutMessage", for logs and error details.
func (op operation) String() string {
	if op > 0 && int(op) < len(operationNames) {
		return operationNames[op]
	}
	return "UnknownOperation"
}

// readOnly reports whether op only reads state. Only these operations are
// served by the read-access secondary endpoint, which in Azure is a
// read-only replica.
func (op operation) readOnly() bool {
	switch op {
	case opListQueues, opGetServiceProperties, opGetServiceStats,
		opGetQueueMetadata, opGetQueueACL, opPeekMessages, opPreflight:
		return true
	}
	return false
}
