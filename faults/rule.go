package faults

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/azqlib/azq"
)

// Rule is one fault: when a request matches When, its answer becomes
// Then. The zero When matches every operation.
type Rule struct {
	// Name identifies the rule in hit counts, metrics and the admin
	// endpoint. Empty means one is given when the rule is added
	// ("rule-1", "rule-2", ...). Names are unique within an Injector.
	Name string
	When When
	Then Then
}

// When is a rule's condition. Every field that is set must hold.
type When struct {
	// Operations the rule applies to, as in Operations ("PutMessage");
	// empty means all.
	Operations []string
	// Queue is a queue name, or a prefix ending in "*" ("orders-*");
	// empty means any request, with or without a queue. A rule with a
	// queue never matches the service operations (ListQueues, ...).
	Queue string
	// Account is a storage account name; empty means any.
	Account string
	// Every makes the rule fire on every Every-th request that matches
	// the fields above (the Every-th, the 2·Every-th, ...); 0 or 1 means
	// each one.
	Every int
	// Probability, if not 0, is the chance that the rule fires on a
	// request it would otherwise fire on (after Every), drawn from the
	// Injector's seeded generator. It must be in (0, 1].
	Probability float64
	// Times is the most times the rule fires; 0 means no limit.
	Times int
	// From and Until bound the window in which the rule applies, on the
	// Injector's clock (a mock clock in tests): from From (inclusive) to
	// Until (exclusive); zero leaves that side open.
	From, Until time.Time
	// After and For bound the window relative to the time the rule was
	// added: it opens After later and stays open For; 0 leaves that side
	// open. After excludes From, and For excludes Until.
	After, For time.Duration
}

// Network is a failure of the connection instead of an answer.
type Network string

// The network failures a rule can cause.
const (
	// NetworkClose closes the connection without an answer.
	NetworkClose Network = "close"
	// NetworkReset resets the connection (TCP RST) without an answer.
	NetworkReset Network = "reset"
	// NetworkTruncate sends the status, the headers and half the body of
	// the operation's answer, then closes the connection. The operation
	// takes effect: there is an answer to cut.
	NetworkTruncate Network = "truncate"
)

// Networks lists every Network failure.
var Networks = []Network{NetworkClose, NetworkReset, NetworkTruncate}

// maxDelay bounds a rule's delay: long enough for any client timeout
// worth testing, short enough that a typo does not hang a test for hours.
const maxDelay = 10 * time.Minute

// Then is a rule's result. A rule has an Error, a Network failure, a
// delay, or a delay followed by one of the other two.
type Then struct {
	// Error is the Azure error code to answer with, such as ServerBusy,
	// InternalError, OperationTimedOut, or any other code a test needs.
	Error string
	// Status is the HTTP status of Error. The codes this package knows
	// (ServerBusy 503, InternalError and OperationTimedOut 500) have
	// theirs; any other code needs one, from 400 to 599.
	Status int
	// Message replaces Azure's message for Error.
	Message string
	// Reason is why a ServerBusy is answered, which picks Azure's message
	// for it; empty means ReasonBusy. Only for ServerBusy.
	Reason Reason
	// Network fails the connection instead of answering.
	Network Network
	// Delay holds the answer back this long, on the real clock (a client's
	// timeouts run on it). With MaxDelay, the delay is drawn uniformly
	// from [Delay, MaxDelay]. At most 10 minutes.
	Delay, MaxDelay time.Duration
	// Applied makes the operation take effect before the Error or Network
	// failure replaces its answer: the client does not learn that it
	// succeeded, and its retry meets the consequences (a second copy of
	// a message, a 404 for a Delete). NetworkTruncate always applies.
	Applied bool
}

// FieldError is an invalid field of a rule or a rules file: where it is
// and what is wrong with it.
type FieldError struct {
	// File is the rules file, when the rules came from one.
	File string
	// Field is the field's path, such as "rules[2].when.probability".
	Field string
	// Err says what is wrong.
	Err error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// within prefixes err's field with path (for a FieldError) or makes it a
// FieldError at path.
func within(path string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		f := *fe
		switch {
		case f.Field == "":
			f.Field = path
		case strings.HasPrefix(f.Field, "["):
			f.Field = path + f.Field
		default:
			f.Field = path + "." + f.Field
		}
		return &f
	}
	return &FieldError{Field: path, Err: err}
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Validate reports the first invalid field of r, as a *FieldError whose
// Field is relative to the rule ("when.probability").
func (r *Rule) Validate() error {
	if r.Name != "" && !validName(r.Name) {
		return fieldErr("name", "%q: want 1 to 64 letters, digits, '-', '_' or '.'", r.Name)
	}
	if err := r.When.validate(); err != nil {
		return within("when", err)
	}
	if err := r.Then.validate(); err != nil {
		return within("then", err)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (w *When) validate() error {
	for i, op := range w.Operations {
		if !slices.Contains(Operations, op) {
			hint := ""
			for _, o := range Operations {
				if strings.EqualFold(o, op) || strings.EqualFold(o, op+"s") || strings.EqualFold(o+"s", op) {
					hint = fmt.Sprintf("did you mean %s? ", o)
				}
			}
			return fieldErr(fmt.Sprintf("operations[%d]", i), "%q is not an operation; %swant one of %s", op, hint, strings.Join(Operations, ", "))
		}
	}
	if w.Queue != "" {
		name, _ := strings.CutSuffix(w.Queue, "*")
		if strings.Contains(name, "*") || name == "" && w.Queue != "*" {
			return fieldErr("queue", "%q: want a queue name, or a prefix ending in *", w.Queue)
		}
		if len(name) > 63 {
			return fieldErr("queue", "%q: a queue name has at most 63 characters", w.Queue)
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fieldErr("queue", "%q: queue names have lower-case letters, digits and '-' only", w.Queue)
			}
		}
	}
	if w.Account != "" {
		if len(w.Account) < 3 || len(w.Account) > 24 {
			return fieldErr("account", "%q: an account name has 3 to 24 characters", w.Account)
		}
		for _, c := range w.Account {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return fieldErr("account", "%q: account names have lower-case letters and digits only", w.Account)
			}
		}
	}
	switch {
	case w.Every < 0:
		return fieldErr("every", "%d: want 1 or more (or 0 for every request)", w.Every)
	case math.IsNaN(w.Probability) || w.Probability < 0 || w.Probability > 1:
		return fieldErr("probability", "%v: want a number in (0, 1] (or 0 for always)", w.Probability)
	case w.Times < 0:
		return fieldErr("times", "%d: want 1 or more (or 0 for no limit)", w.Times)
	case w.After < 0:
		return fieldErr("after", "%v: want a positive duration", w.After)
	case w.For < 0:
		return fieldErr("for", "%v: want a positive duration", w.For)
	case !w.From.IsZero() && w.After != 0:
		return fieldErr("after", "give from or after, not both")
	case !w.Until.IsZero() && w.For != 0:
		return fieldErr("for", "give until or for, not both")
	case !w.From.IsZero() && !w.Until.IsZero() && !w.Until.After(w.From):
		return fieldErr("until", "%s is not after from (%s)", w.Until.Format(time.RFC3339Nano), w.From.Format(time.RFC3339Nano))
	}
	return nil
}

func (t *Then) validate() error {
	switch {
	case t.Error == "" && t.Network == "" && t.Delay == 0 && t.MaxDelay == 0:
		return fieldErr("", "a rule needs a result: error, network, or delay")
	case t.Error != "" && t.Network != "":
		return fieldErr("network", "give error or network, not both")
	case t.Delay < 0:
		return fieldErr("delay", "%v: want a positive duration", t.Delay)
	case t.Delay > maxDelay:
		return fieldErr("delay", "%v: at most %v", t.Delay, maxDelay)
	case t.MaxDelay != 0 && t.MaxDelay < t.Delay:
		return fieldErr("max_delay", "%v is less than delay (%v)", t.MaxDelay, t.Delay)
	case t.MaxDelay > maxDelay:
		return fieldErr("max_delay", "%v: at most %v", t.MaxDelay, maxDelay)
	case t.Applied && t.Error == "" && t.Network == "":
		return fieldErr("applied", "an applied operation needs an error or a network failure to lose its answer")
	}
	if t.Network != "" && !slices.Contains(Networks, t.Network) {
		return fieldErr("network", "%q: want close, reset or truncate", t.Network)
	}
	if t.Error == "" {
		switch {
		case t.Status != 0:
			return fieldErr("status", "a status needs an error code")
		case t.Message != "":
			return fieldErr("message", "a message needs an error code")
		case t.Reason != "":
			return fieldErr("reason", "a reason needs error ServerBusy")
		}
		return nil
	}
	if !validCode(t.Error) {
		return fieldErr("error", "%q: want an Azure error code such as ServerBusy (letters and digits)", t.Error)
	}
	known, isKnown := badDay[t.Error]
	switch {
	case isKnown && t.Status != 0 && t.Status != known.status:
		return fieldErr("status", "%d: Azure answers %s with %d", t.Status, t.Error, known.status)
	case !isKnown && t.Status == 0:
		return fieldErr("status", "missing: give the HTTP status Azure answers %s with (400 to 599)", t.Error)
	case t.Status != 0 && (t.Status < 400 || t.Status > 599):
		return fieldErr("status", "%d: want an error status, 400 to 599", t.Status)
	case t.Reason != "" && t.Error != CodeServerBusy:
		return fieldErr("reason", "only ServerBusy has a reason")
	case t.Reason != "" && !slices.Contains(Reasons, t.Reason):
		return fieldErr("reason", "%q: want busy, operations, ingress or egress", t.Reason)
	case len(t.Message) > 1024:
		return fieldErr("message", "at most 1024 bytes")
	}
	return nil
}

func validCode(s string) bool {
	if s == "" || len(s) > 64 || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// AzureError returns the error t answers with, or nil when it has none:
// the code, its status and Azure's message for it (or t.Message). For a
// code this package does not know and no message, the message is empty:
// azq's server then gives Azure's message for the code, as it knows it.
func (t *Then) AzureError() *azq.Error {
	if t.Error == "" {
		return nil
	}
	e := &azq.Error{Code: azq.ErrorCode(t.Error), StatusCode: t.Status, Message: t.Message}
	if known, ok := badDay[t.Error]; ok {
		e.StatusCode = known.status
		if e.Message == "" {
			e.Message = known.message
			if t.Error == CodeServerBusy {
				e.Message = t.Reason.Message()
			}
		}
	}
	if e.StatusCode == 0 {
		e.StatusCode = http.StatusInternalServerError
	}
	return e
}
