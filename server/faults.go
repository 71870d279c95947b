package server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
	"github.com/azqlib/azq/observe"
)

// This file holds the server's side of fault injection and observation:
// what Options.Faults decides for a request, served, and what
// Options.Observe is told about it. The request path calls in here only
// when those options are set.

// faultState is what the request path keeps of an injected fault; the
// request holds a pointer to it, set only when a fault fires, which keeps
// the request within its allocation size class.
type faultState struct {
	// rule names the rule that failed the request, or faults.ThrottleRule.
	rule string
	// applied is set when the operation took effect before its answer was
	// replaced.
	applied bool
	// network is set when the connection was failed instead of answered.
	network bool
}

// messagesAsked is how many messages the request handles, for the
// throttle: what Get and Peek ask for, one for the other message
// operations, none for the rest.
func (q *request) messagesAsked() int {
	switch q.op {
	case opGetMessages, opPeekMessages:
		if v, ok := q.query.get("numofmessages"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
		return 1
	case opPutMessage, opUpdateMessage, opDeleteMessage, opClearMessages:
		return 1
	}
	return 0
}

// injectFault serves what the injector decides for the request and
// reports whether it has answered (or failed the connection) already.
// Without a failing fault, it returns false after any delay, and the
// operation runs as usual.
func (q *request) injectFault() bool {
	d := q.s.faults.Decide(faults.Request{Operation: q.op.String(), Account: q.acct.acct.Name, Queue: q.queue, Messages: q.messagesAsked()})
	if d.Delay > 0 {
		if faults.Sleep(q.r.Context(), d.Delay) != nil {
			// The client went away while the answer was held back: the
			// client's cancellation, as in fail.
			q.canceled = true
			panic(http.ErrAbortHandler)
		}
	}
	if !d.Fails() {
		return false
	}
	q.fault = &faultState{rule: d.Rule}
	var answer *capturedAnswer
	if d.Applied {
		answer = q.runCaptured()
		q.fault.applied = answer.status < 400
	}
	switch d.Network {
	case "":
		msg := d.Error.Message
		if msg == "" {
			msg = AzureMessage(d.Error.Code, d.Error.StatusCode)
		}
		q.answerError(d.Error, msg)
	case faults.NetworkTruncate:
		q.fault.network = true
		q.cutAnswer(answer)
	default:
		q.fault.network = true
		q.dropConnection(d.Network == faults.NetworkReset)
	}
	return true
}

// AzureMessage returns the message the server answers an error code with:
// Azure's message for the codes it knows, else the status's text. Code
// that answers as azq's server does, in process, uses it.
func AzureMessage(code azq.ErrorCode, status int) string {
	if m := errorMessage(&azq.Error{Code: code, StatusCode: status}); m != "" {
		return m
	}
	return http.StatusText(status) + "."
}

// capturedAnswer is an answer the client never received as it was.
type capturedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capturedAnswer) Header() http.Header { return c.header }
func (c *capturedAnswer) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}
func (c *capturedAnswer) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(p)
}

// runCaptured runs the operation with its answer kept from the client,
// and returns the answer. The request is then as if unanswered.
func (q *request) runCaptured() *capturedAnswer {
	real := q.w
	c := &capturedAnswer{header: http.Header{}}
	q.w = c
	if err := q.runOperation(); err != nil {
		q.fail(err)
	}
	q.w = real
	if c.status == 0 {
		c.status = http.StatusOK
	}
	q.wrote, q.status, q.errCode, q.bodyLen = false, 0, "", -1
	return c
}

// dropConnection ends the connection without an answer: closed, or with
// reset, reset (TCP RST). Over HTTP/2, which has no connection of its own
// per request, the stream is reset instead.
func (q *request) dropConnection(reset bool) {
	// The client may still be sending its body: read it first, so that
	// it sees the connection end where it waits for the answer (EOF),
	// not a failed write.
	if q.r.Body != nil {
		io.Copy(io.Discard, io.LimitReader(q.r.Body, maxRequestBody+1))
	}
	conn, _, err := http.NewResponseController(q.w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if reset {
		lingerZero(conn)
	}
	conn.Close()
}

// lingerZero makes closing c reset the connection, looking through
// wrappers (TLS, listeners') that expose the connection they wrap.
func lingerZero(c net.Conn) {
	for c != nil {
		if l, ok := c.(interface{ SetLinger(int) error }); ok {
			l.SetLinger(0)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}

// cutAnswer sends the first half of the answer, as it would have gone on
// the wire, and closes the connection: half the body after the status and
// headers, or half of those when there is no body. Over HTTP/2 the
// headers and half the body are sent and the stream is reset.
func (q *request) cutAnswer(a *capturedAnswer) {
	q.status = a.status
	body := a.body.Bytes()
	conn, buf, err := http.NewResponseController(q.w).Hijack()
	if err != nil {
		h := q.w.Header()
		for k, v := range a.header {
			h[k] = v
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		q.w.WriteHeader(a.status)
		q.w.Write(body[:len(body)/2])
		http.NewResponseController(q.w).Flush()
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	q.wrote = true
	var wire bytes.Buffer
	resp := http.Response{StatusCode: a.status, ProtoMajor: 1, ProtoMinor: 1, Header: a.header,
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body))}
	resp.Write(&wire)
	head := wire.Len() - len(body)
	n := head / 2
	if len(body) > 0 {
		n = head + len(body)/2
	}
	buf.Write(wire.Bytes()[:n])
	buf.Flush()
}

// droppedConnection reports whether an injected fault failed the
// connection instead of answering.
func (q *request) droppedConnection() bool { return q.fault != nil && q.fault.network }

// observe tells Options.Observe about the answered request.
func (q *request) observe(took time.Duration, aborted bool) {
	o := observe.Observation{
		Operation: q.op.String(),
		Status:    q.status,
		ErrorCode: q.errCode,
		Duration:  took,
	}
	if f := q.fault; f != nil {
		o.Applied, o.Fault = f.applied, f.rule
	}
	if q.acct != nil {
		o.Account = q.acct.acct.Name
		if q.queue != "" && azq.ValidateQueueName(q.queue) == nil {
			o.Queue = q.queue
		}
	}
	o.Outcome = observe.OutcomeOf(q.status, q.errCode, aborted || q.canceled || q.droppedConnection())
	q.s.observe(o)
}
