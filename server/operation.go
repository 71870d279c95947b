package server

import "net/http"

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

// operationInfo is what the server knows about an operation besides its
// routes: its name, whether it only reads, and the method that serves it.
type operationInfo struct {
	name string
	// readOnly operations are the only ones the read-access secondary
	// endpoint, a read-only replica in Azure, serves.
	readOnly bool
	serve    func(*request) error
}

var operations = [...]operationInfo{
	opListQueues:           {"ListQueues", true, (*request).listQueues},
	opGetServiceProperties: {"GetServiceProperties", true, (*request).getServiceProperties},
	opSetServiceProperties: {"SetServiceProperties", false, (*request).setServiceProperties},
	opGetServiceStats:      {"GetServiceStats", true, (*request).getServiceStats},
	opPreflight:            {"Preflight", true, nil}, // answered before authorization
	opCreateQueue:          {"CreateQueue", false, (*request).createQueue},
	opDeleteQueue:          {"DeleteQueue", false, (*request).deleteQueue},
	opGetQueueMetadata:     {"GetQueueMetadata", true, (*request).getQueueMetadata},
	opSetQueueMetadata:     {"SetQueueMetadata", false, (*request).setQueueMetadata},
	opGetQueueACL:          {"GetQueueACL", true, (*request).getQueueACL},
	opSetQueueACL:          {"SetQueueACL", false, (*request).setQueueACL},
	opPutMessage:           {"PutMessage", false, (*request).putMessage},
	opGetMessages:          {"GetMessages", false, (*request).getMessages},
	opPeekMessages:         {"PeekMessages", true, (*request).peekMessages},
	opDeleteMessage:        {"DeleteMessage", false, (*request).deleteMessage},
	opClearMessages:        {"ClearMessages", false, (*request).clearMessages},
	opUpdateMessage:        {"UpdateMessage", false, (*request).updateMessage},
}

// String returns the operation's name as Azure's documentation spells it,
// e.g. "PutMessage", for logs and error details.
func (op operation) String() string {
	if op > 0 && int(op) < len(operations) {
		return operations[op].name
	}
	return "UnknownOperation"
}

// readOnly reports whether op only reads state.
func (op operation) readOnly() bool {
	return op > 0 && int(op) < len(operations) && operations[op].readOnly
}

// resource is what a request path names below the account.
type resource int

const (
	resService  resource = iota // "/"
	resQueue                    // "/queue"
	resMessages                 // "/queue/messages"
	resMessage                  // "/queue/messages/id"
)

// route maps a resource, a method and the comp and restype parameters to
// an operation. comp and restype are matched on the service and queue
// resources only; the message resources ignore them, as Azure does.
type route struct {
	res     resource
	comp    string // "" matches a request without comp (or with comp=)
	restype string
	method  string
	op      operation
	// minVersion is the first x-ms-version (yyyymmdd) that has the
	// operation; older versions get 405 UnsupportedHttpVerb.
	minVersion int
}

// routes is the Queue service's URL space. OPTIONS on any path is a CORS
// preflight and is not listed. Get Messages becomes Peek Messages with
// peekonly=true (see classify).
var routes = []route{
	{res: resService, comp: "list", method: http.MethodGet, op: opListQueues},
	{res: resService, comp: "properties", restype: "service", method: http.MethodGet, op: opGetServiceProperties},
	{res: resService, comp: "properties", restype: "service", method: http.MethodPut, op: opSetServiceProperties},
	{res: resService, comp: "stats", restype: "service", method: http.MethodGet, op: opGetServiceStats},

	{res: resQueue, method: http.MethodPut, op: opCreateQueue},
	{res: resQueue, method: http.MethodDelete, op: opDeleteQueue},
	{res: resQueue, comp: "metadata", method: http.MethodGet, op: opGetQueueMetadata},
	{res: resQueue, comp: "metadata", method: http.MethodHead, op: opGetQueueMetadata},
	{res: resQueue, comp: "metadata", method: http.MethodPut, op: opSetQueueMetadata},
	{res: resQueue, comp: "acl", method: http.MethodGet, op: opGetQueueACL},
	{res: resQueue, comp: "acl", method: http.MethodHead, op: opGetQueueACL},
	{res: resQueue, comp: "acl", method: http.MethodPut, op: opSetQueueACL},

	{res: resMessages, method: http.MethodPost, op: opPutMessage},
	{res: resMessages, method: http.MethodGet, op: opGetMessages},
	{res: resMessages, method: http.MethodDelete, op: opClearMessages},

	{res: resMessage, method: http.MethodPut, op: opUpdateMessage, minVersion: 20110818},
	{res: resMessage, method: http.MethodDelete, op: opDeleteMessage},
}

// findRoute returns the operation for a resource, method, comp and
// restype. found is false when no route has the resource with that comp
// and restype; allowed is false when one has, but not with that method.
func findRoute(res resource, method, comp, restype string) (r route, found, allowed bool) {
	for _, rt := range routes {
		if rt.res != res {
			continue
		}
		if res <= resQueue && (rt.comp != comp || res == resService && rt.restype != restype) {
			continue
		}
		found = true
		if rt.method == method {
			return rt, true, true
		}
	}
	return route{}, found, false
}
