package worker

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/azqlib/azq"
)

// PoisonSuffix is appended to a queue's name to name its poison queue, as in
// Functions.
const PoisonSuffix = "-poison"

// PoisonQueueName returns the name of the poison queue of the queue name,
// and false when there must be none, by the Functions rules: a queue whose
// name already ends in "-poison" has no poison queue (poison of poison would
// never end), and neither has one whose suffixed name would break Azure's
// naming rules (longer than 63 characters, or no name at all).
func PoisonQueueName(name string) (string, bool) {
	if name == "" || strings.HasSuffix(name, PoisonSuffix) {
		return "", false
	}
	p := name + PoisonSuffix
	if azq.ValidateQueueName(p) != nil {
		return "", false
	}
	return p, true
}

// Reasons a message is set aside, as PoisonRecord.Reason gives them.
const (
	// ReasonHandlerFailed: the handler failed on the last allowed attempt.
	ReasonHandlerFailed = "handler-failed"
	// ReasonDequeueCountExceeded: the message arrived with a DequeueCount
	// above MaxDequeueCount, so an earlier attempt ended without an
	// outcome (its worker crashed or lost the lease) and the handler was
	// not run again.
	ReasonDequeueCountExceeded = "dequeue-count-exceeded"
)

// PoisonRecord is what the worker puts in the poison queue, as JSON, unless
// Options.PoisonBodyOnly is set. Functions copies only the body, which loses
// why the message failed and which message it was; the record keeps both,
// and ParsePoisonRecord gives the body back for replay.
type PoisonRecord struct {
	// Body is the message's last content (including checkpoints), when it
	// is valid UTF-8; otherwise BodyBase64 holds it, so no byte is lost.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"bodyBase64,omitempty"`
	// Queue is the source queue's name.
	Queue string `json:"queue,omitempty"`
	// MessageID, InsertionTime and DequeueCount are those of the original
	// message, which the copy in the poison queue does not keep.
	MessageID     azq.MessageID `json:"messageId"`
	InsertionTime time.Time     `json:"insertionTime"`
	DequeueCount  int64         `json:"dequeueCount"`
	// Reason is ReasonHandlerFailed or ReasonDequeueCountExceeded.
	Reason string `json:"reason"`
	// Error is the handler's error on the last attempt, if any.
	Error string `json:"error,omitempty"`
	// PoisonedAt is when the worker set the message aside, on its clock.
	PoisonedAt time.Time `json:"poisonedAt"`
}

// Content returns the original message body.
func (r PoisonRecord) Content() string {
	if r.BodyBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(r.BodyBase64)
		if err == nil {
			return string(b)
		}
	}
	return r.Body
}

// ParsePoisonRecord decodes a poison message written by the worker.
func ParsePoisonRecord(content string) (PoisonRecord, error) {
	var r PoisonRecord
	err := json.Unmarshal([]byte(content), &r)
	return r, err
}

func (r *PoisonRecord) setBody(body string) {
	if utf8.ValidString(body) {
		r.Body = body
	} else {
		r.BodyBase64 = base64.StdEncoding.EncodeToString([]byte(body))
	}
}

func (r PoisonRecord) marshal() string {
	b, err := json.Marshal(r)
	if err != nil {
		// Only strings, an ID, times and an int: cannot fail.
		panic("worker: cannot encode poison record: " + err.Error())
	}
	return string(b)
}
