package server

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/azqlib/azq"
)

const (
	maxTTLBefore20170729   = 7 * 24 * 3600 // seconds
	maxMessageBefore201108 = 8 << 10       // bytes
	maxGetVisBefore201108  = 2 * 3600      // seconds
	rfc1123GMT             = http.TimeFormat
	// maxMessagesPerGet is Azure's most messages per Get, the room
	// getMessages keeps for them in a pooled array.
	maxMessagesPerGet = 32
)

var noCache = []string{"no-cache"}

// queueHandle returns the addressed queue, through the account's back
// end; operations on a missing one give QueueNotFound.
func (q *request) queueHandle() (azq.QueueRef, error) {
	return q.acct.svc.Ref(q.queue)
}

// appendGetter is a QueueRef that can get messages into a slice of the
// caller's, as the in-memory back end's (azq.NamedQueue) can: getMessages
// then gets them into a pooled array instead of a new slice per request.
// Other back ends are served through Get.
type appendGetter interface {
	AppendGet(ctx context.Context, dst []azq.Message, n int, visibility time.Duration) ([]azq.Message, error)
}

// messageArrays holds the arrays getMessages gets messages into. They are
// pooled rather than kept on its stack, because a call through an
// interface makes its argument escape.
var messageArrays = sync.Pool{New: func() any { return new([maxMessagesPerGet]azq.Message) }}

// optionalSeconds reads an optional Int32 seconds parameter.
func (q *request) optionalSeconds(name string) (int, bool, error) {
	v, ok := q.query.get(name)
	if !ok {
		return 0, false, nil
	}
	n, err := parseInt32(name, v)
	return n, true, err
}

// maxTTLSeconds is the largest messagettl: Azure's Put Message takes any
// positive number of seconds (an Int64 on the wire) from version
// 2017-07-29 on.
const maxTTLSeconds = math.MaxInt64

// parseTTL reads messagettl: from 2017-07-29 on, -1 (never expires) or
// 1 to maxTTLSeconds; before it, 1 to 7 days. A count of seconds too large
// for a time.Duration saturates: the core then reports the expiration time
// as 9999-12-31T23:59:59Z and never expires the message.
func parseTTL(v string, verNum int) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, invalidQueryValue("messagettl", v, "")
	}
	switch {
	case verNum < 20170729 && (n < 1 || n > maxTTLBefore20170729):
		return 0, outOfRange("messagettl", v, "1", strconv.Itoa(maxTTLBefore20170729))
	case n == -1:
		return azq.NeverExpires, nil
	case n < 1:
		return 0, outOfRange("messagettl", v, "-1", strconv.FormatInt(maxTTLSeconds, 10))
	case n > math.MaxInt64/int64(time.Second):
		return math.MaxInt64, nil
	}
	return time.Duration(n) * time.Second, nil
}

// messageBody reads and parses a QueueMessage body and applies the
// message size limit of old service versions; the current limit is the
// core's.
func (q *request) messageBody() (string, error) {
	b := getBuf()
	defer putBuf(b)
	if err := q.readBody(b); err != nil {
		return "", err
	}
	text, err := parseMessageText(b.b)
	if err != nil {
		return "", err
	}
	if q.verNum < 20110818 && len(text) > maxMessageBefore201108 {
		return "", bodyTooLarge(maxMessageBefore201108)
	}
	return text, nil
}

func (q *request) putMessage() error {
	vis, _, err := q.optionalSeconds("visibilitytimeout")
	if err != nil {
		return err
	}
	opts := azq.PutOptions{VisibilityTimeout: time.Duration(vis) * time.Second}
	if v, ok := q.query.get("messagettl"); ok {
		ttl, err := parseTTL(v, q.verNum)
		if err != nil {
			return err
		}
		opts.TimeToLive = ttl
	}
	text, err := q.messageBody()
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	// Options go to the back end only when set: through the interface,
	// a pointer to them would cost every Put an allocation.
	var po *azq.PutOptions
	if opts != (azq.PutOptions{}) {
		o := opts
		po = &o
	}
	m, err := qu.Put(q.r.Context(), text, po)
	if err != nil {
		return err
	}
	q.writeMessages(http.StatusCreated, []azq.Message{m}, putForm)
	return nil
}

func (q *request) numOfMessages() (int, error) {
	n, ok, err := q.optionalSeconds("numofmessages")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 1, nil
	}
	return n, nil
}

func (q *request) getMessages() error {
	n, err := q.numOfMessages()
	if err != nil {
		return err
	}
	vis := azq.DefaultVisibilityTimeout
	if v, ok, err := q.optionalSeconds("visibilitytimeout"); err != nil {
		return err
	} else if ok {
		if q.verNum < 20110818 && (v < 1 || v > maxGetVisBefore201108) {
			raw, _ := q.query.get("visibilitytimeout")
			return outOfRange("visibilitytimeout", raw, "1", strconv.Itoa(maxGetVisBefore201108))
		}
		vis = time.Duration(v) * time.Second
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	ag, ok := qu.(appendGetter)
	if !ok {
		ms, err := qu.Get(q.r.Context(), n, vis)
		if err != nil {
			return err
		}
		q.writeMessages(http.StatusOK, ms, getForm)
		return nil
	}
	// The messages are written out before this returns, so the array
	// is free again then.
	arr := messageArrays.Get().(*[maxMessagesPerGet]azq.Message)
	ms, err := ag.AppendGet(q.r.Context(), arr[:0], n, vis)
	if err == nil {
		q.writeMessages(http.StatusOK, ms, getForm)
	}
	clear(arr[:min(len(ms), len(arr))]) // drop the messages' contents
	messageArrays.Put(arr)
	return err
}

func (q *request) peekMessages() error {
	n, err := q.numOfMessages()
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	ms, err := qu.Peek(q.r.Context(), n)
	if err != nil {
		return err
	}
	q.writeMessages(http.StatusOK, ms, peekForm)
	return nil
}

// messageForm is the set of QueueMessage elements an operation answers
// with.
type messageForm int

const (
	putForm  messageForm = iota // Put: ID, times, receipt; no count or text
	getForm                     // Get: every element
	peekForm                    // Peek: no receipt, no next-visible time
)

// writeMessages answers Put, Get or Peek with a QueueMessagesList.
func (q *request) writeMessages(status int, ms []azq.Message, form messageForm) {
	b := getBuf()
	b.b = append(b.b, xmlHeader...)
	if len(ms) == 0 {
		b.b = append(b.b, "<QueueMessagesList />"...)
	} else {
		b.b = append(b.b, "<QueueMessagesList>"...)
		for i := range ms {
			b.b = appendQueueMessage(b.b, &ms[i], form)
		}
		b.b = append(b.b, "</QueueMessagesList>"...)
	}
	q.w.Header()["Cache-Control"] = noCache
	q.writeXML(status, b.b)
	putBuf(b)
}

// appendQueueMessage appends m as a QueueMessage element in the given
// form, its elements in the order Azure writes them.
func appendQueueMessage(b []byte, m *azq.Message, form messageForm) []byte {
	b = append(b, "<QueueMessage><MessageId>"...)
	b = appendUUID(b, m.ID)
	b = append(b, "</MessageId><InsertionTime>"...)
	b = appendHTTPTime(b, m.InsertionTime)
	b = append(b, "</InsertionTime><ExpirationTime>"...)
	b = appendHTTPTime(b, m.ExpirationTime)
	b = append(b, "</ExpirationTime>"...)
	if form != peekForm {
		b = append(b, "<PopReceipt>"...)
		b = appendReceipt(b, m.PopReceipt)
		b = append(b, "</PopReceipt><TimeNextVisible>"...)
		b = appendHTTPTime(b, m.NextVisibleTime)
		b = append(b, "</TimeNextVisible>"...)
	}
	if form != putForm {
		b = append(b, "<DequeueCount>"...)
		b = strconv.AppendInt(b, m.DequeueCount, 10)
		b = append(b, "</DequeueCount><MessageText>"...)
		b = appendEscaped(b, m.Content)
		b = append(b, "</MessageText>"...)
	}
	return append(b, "</QueueMessage>"...)
}

// receipt reads the popreceipt parameter.
func (q *request) receipt() (azq.PopReceipt, error) {
	v, ok := q.query.get("popreceipt")
	if !ok {
		return azq.PopReceipt{}, missingQuery("popreceipt")
	}
	return azq.ParsePopReceipt(v)
}

func (q *request) deleteMessage() error {
	rc, err := q.receipt()
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	id, err := azq.ParseMessageID(q.msgID)
	if err != nil {
		return err
	}
	if err := qu.Delete(q.r.Context(), id, rc); err != nil {
		return err
	}
	q.writeHeader(http.StatusNoContent)
	return nil
}

func (q *request) clearMessages() error {
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	if err := qu.Clear(q.r.Context()); err != nil {
		return err
	}
	q.writeHeader(http.StatusNoContent)
	return nil
}

func (q *request) updateMessage() error {
	rc, err := q.receipt()
	if err != nil {
		return err
	}
	vis, ok, err := q.optionalSeconds("visibilitytimeout")
	if err != nil {
		return err
	}
	if !ok {
		return missingQuery("visibilitytimeout")
	}
	var content *string
	b := getBuf()
	err = q.readBody(b)
	if err == nil && len(b.b) > 0 {
		var text string
		text, err = parseMessageText(b.b)
		content = &text
	}
	putBuf(b)
	if err != nil {
		return err
	}
	qu, err := q.queueHandle()
	if err != nil {
		return err
	}
	id, err := azq.ParseMessageID(q.msgID)
	if err != nil {
		return err
	}
	res, err := qu.Update(q.r.Context(), id, rc, time.Duration(vis)*time.Second, content)
	if err != nil {
		return err
	}
	// The time is formatted on the stack, and the two values share one
	// backing array, as setCommonHeaders's do.
	var t [len(rfc1123GMT)]byte
	vals := []string{res.PopReceipt.String(), string(appendHTTPTime(t[:0], res.NextVisibleTime))}
	h := q.w.Header()
	h["X-Ms-Popreceipt"] = vals[0:1:1]
	h["X-Ms-Time-Next-Visible"] = vals[1:2:2]
	q.writeHeader(http.StatusNoContent)
	return nil
}

func appendReceipt(b []byte, r azq.PopReceipt) []byte {
	b, _ = r.AppendText(b)
	return b
}
