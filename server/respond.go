package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/faults"
)

// serverHeader is the Server header Azure's queue service sends.
var serverHeader = []string{"Windows-Azure-Queue/1.0 Microsoft-HTTPAPI/2.0"}

var xmlContentType = []string{"application/xml"}

// newRequestID returns a random (version 4) UUID for x-ms-request-id. The
// runtime's per-thread ChaCha8 generator makes this cheap; request IDs
// identify requests in logs and need not be secret.
func newRequestID() string {
	var b [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	return string(appendUUID(out[:0], b))
}

// appendUUID appends id in the canonical 8-4-4-4-12 lower-case hex form,
// the form of message IDs and request IDs on the wire.
func appendUUID(b []byte, id [16]byte) []byte {
	const hexd = "0123456789abcdef"
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexd[c>>4], hexd[c&0xf])
	}
	return b
}

// maxClientRequestID is the documented limit of x-ms-client-request-id:
// 1 KiB.
const maxClientRequestID = 1024

// checkClientRequestID refuses an x-ms-client-request-id over the
// documented 1 KiB limit with 400 InvalidHeaderValue, the service's code
// for a header value it cannot accept; setCommonHeaders does not echo it.
func (q *request) checkClientRequestID() error {
	id := q.r.Header["X-Ms-Client-Request-Id"]
	if len(id) == 0 || len(id[0]) <= maxClientRequestID {
		return nil
	}
	return &azq.Error{Code: "InvalidHeaderValue", StatusCode: http.StatusBadRequest,
		Message: msgInvalidHeaderValue,
		Details: []azq.Detail{{Name: "HeaderName", Value: "x-ms-client-request-id"}, {Name: "HeaderValue", Value: truncate(id[0], 256)}}}
}

// setCommonHeaders sets the headers every response carries, and the
// Content-Length of a body writeXML sends. The values share one backing
// array: one allocation instead of one per header.
func (q *request) setCommonHeaders() {
	h := q.w.Header()
	vals := make([]string, 5)
	vals[0], vals[1], vals[2] = q.reqID, q.version, q.s.date(q.now)
	h["X-Ms-Request-Id"] = vals[0:1:1]
	h["X-Ms-Version"] = vals[1:2:2]
	h["Date"] = vals[2:3:3]
	h["Server"] = serverHeader
	if id := q.r.Header["X-Ms-Client-Request-Id"]; len(id) > 0 && len(id[0]) <= maxClientRequestID {
		vals[3] = id[0]
		h["X-Ms-Client-Request-Id"] = vals[3:4:4]
	}
	if q.bodyLen >= 0 {
		vals[4] = strconv.Itoa(q.bodyLen)
		h["Content-Length"] = vals[4:5:5]
	}
	if q.acct != nil {
		if _, ok := q.r.Header["Origin"]; ok && q.op != opPreflight {
			q.corsHeaders(h)
		}
	}
}

// cachedDate is the Date header text of one second.
type cachedDate struct {
	unix int64
	text string
}

// date formats t for the Date header, reusing the text while the second
// does not change.
func (s *Server) date(t time.Time) string {
	sec := t.Unix()
	if d := s.dateCache.Load(); d != nil && d.unix == sec {
		return d.text
	}
	d := &cachedDate{unix: sec, text: t.UTC().Format(http.TimeFormat)}
	s.dateCache.Store(d)
	return d.text
}

// appendHTTPTime appends t in UTC in the form of http.TimeFormat, as
// t.UTC().AppendFormat(b, http.TimeFormat) does, without interpreting the
// layout: a Get or Put response carries three times per message. Years
// outside 0 to 9999 are left to AppendFormat.
func appendHTTPTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, http.TimeFormat)
	}
	hour, min, sec := t.Clock()
	const days = "SunMonTueWedThuFriSat"
	const months = "JanFebMarAprMayJunJulAugSepOctNovDec"
	wd, mo := int(t.Weekday())*3, (int(month)-1)*3
	return append(b,
		days[wd], days[wd+1], days[wd+2], ',', ' ',
		byte('0'+day/10), byte('0'+day%10), ' ',
		months[mo], months[mo+1], months[mo+2], ' ',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), ' ',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), ' ', 'G', 'M', 'T')
}

// writeHeader sends the status line with the common headers.
func (q *request) writeHeader(status int) {
	q.setCommonHeaders()
	q.status = status
	q.wrote = true
	q.w.WriteHeader(status)
}

// writeXML sends an XML body.
func (q *request) writeXML(status int, body []byte) {
	h := q.w.Header()
	h["Content-Type"] = xmlContentType
	q.bodyLen = len(body)
	q.writeHeader(status)
	if q.r.Method != http.MethodHead {
		q.w.Write(body)
	}
}

// fail answers with Azure's Error XML and x-ms-error-code for err. A
// request whose client went away gets no answer, as nobody would receive
// it: the connection is dropped (http.ErrAbortHandler), so that a client
// that is somehow still there sees a failure, never an empty 200.
func (q *request) fail(err error) {
	if q.wrote {
		return
	}
	if q.clientGone(err) {
		q.canceled = true
		panic(http.ErrAbortHandler)
	}
	e := failure(err)
	if e.StatusCode >= 500 && (err != error(e) || e.Message != "") {
		// The answer says only what Azure would; what the back end
		// said (a database's error, say) goes to the log.
		q.cause = err
	}
	q.answerError(e, errorMessage(e))
}

// answerError answers with e and the message msg.
func (q *request) answerError(e *azq.Error, msg string) {
	if q.now.IsZero() {
		// No account yet (unknown account, malformed path): every
		// account reads the server's clock, so take the time from it.
		q.now = q.s.clock.Now()
	}
	q.errCode = string(e.Code)
	h := q.w.Header()
	h["X-Ms-Error-Code"] = []string{string(e.Code)}
	if q.r.Method == http.MethodHead {
		q.writeHeader(e.StatusCode)
		return
	}
	b := getBuf()
	b.b = appendErrorXML(b.b, e, msg, q.reqID, q.now)
	q.writeXML(e.StatusCode, b.b)
	putBuf(b)
}

// appendErrorXML appends Azure's Error document for e: its code, msg
// (the message Azure gives for it) with the request ID and time, and its
// detail elements.
func appendErrorXML(b []byte, e *azq.Error, msg, reqID string, now time.Time) []byte {
	b = append(b, xmlHeader...)
	b = append(b, "<Error><Code>"...)
	b = appendEscaped(b, string(e.Code))
	b = append(b, "</Code><Message>"...)
	b = appendEscaped(b, msg)
	b = append(b, "\nRequestId:"...)
	b = append(b, reqID...)
	b = append(b, "\nTime:"...)
	b = now.UTC().AppendFormat(b, "2006-01-02T15:04:05.0000000Z")
	b = append(b, "</Message>"...)
	for _, d := range e.Details {
		name := d.Name
		if !validXMLName(name) {
			continue
		}
		b = append(b, '<')
		b = append(b, name...)
		if d.Value == "" {
			// .NET's XmlWriter, which writes Azure's answers, writes an
			// empty element so.
			b = append(b, " />"...)
			continue
		}
		b = append(b, '>')
		b = appendEscaped(b, d.Value)
		b = append(b, "</"...)
		b = append(b, name...)
		b = append(b, '>')
	}
	return append(b, "</Error>"...)
}

// WriteError answers r with e as the Azure Storage services answer an
// error: the status, x-ms-error-code, x-ms-request-id, the x-ms-version
// asked for, and (but to a HEAD request) the Error XML with e's code,
// message and details. It is for handlers beside a Server that must answer
// as an Azure service does, such as azqd's stand-ins for services it does
// not serve.
func WriteError(w http.ResponseWriter, r *http.Request, e *azq.Error) {
	reqID := newRequestID()
	h := w.Header()
	h["X-Ms-Error-Code"] = []string{string(e.Code)}
	h["X-Ms-Request-Id"] = []string{reqID}
	if v := r.Header.Get("x-ms-version"); v != "" {
		h["X-Ms-Version"] = []string{v}
	}
	body := appendErrorXML(nil, e, errorMessage(e), reqID, time.Now())
	h["Content-Type"] = xmlContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(e.StatusCode)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

const xmlHeader = `<?xml version="1.0" encoding="utf-8"?>`

// Azure's messages for the codes the server reports; the core's own
// messages are kept for codes not listed.
const (
	msgInvalidHeaderValue  = "The value for one of the HTTP headers is not in the correct format."
	msgInvalidQueryValue   = "Value for one of the query parameters specified in the request URI is invalid."
	msgOutOfRangeQuery     = "One of the query parameters specified in the request URI is outside the permissible range."
	msgInvalidXMLDocument  = "XML specified is not syntactically valid."
	msgInvalidXMLNodeValue = "The value for one of the XML nodes is not in the correct format."
)

var azureMessages = map[azq.ErrorCode]string{
	azq.CodeMessageNotFound:               "The specified message does not exist.",
	azq.CodeQueueNotFound:                 "The specified queue does not exist.",
	azq.CodeQueueAlreadyExists:            "The specified queue already exists.",
	azq.CodeRequestBodyTooLarge:           "The request body is too large and exceeds the maximum permissible limit.",
	azq.CodeOutOfRangeQueryParameterValue: msgOutOfRangeQuery,
	azq.CodeInvalidQueryParameterValue:    msgInvalidQueryValue,
	azq.CodeOutOfRangeInput:               "The specified resource name length is not within the permissible limits.",
	azq.CodeInvalidResourceName:           "The specifed resource name contains invalid characters.",
	azq.CodeInvalidMetadata:               "The metadata specified is invalid. It has characters that are not permitted.",
	azq.CodeEmptyMetadataKey:              "The key for one of the metadata key-value pairs is empty.",
	azq.CodeMetadataTooLarge:              "The size of the specified metadata exceeds the maximum size permitted.",
	azq.CodeInvalidMarker:                 "The specified marker is invalid.",
	azq.CodeInvalidXMLDocument:            msgInvalidXMLDocument,
	azq.CodeInvalidInput:                  "One of the request inputs is not valid.",
	"InvalidXmlNodeValue":                 msgInvalidXMLNodeValue,
	"InvalidHeaderValue":                  msgInvalidHeaderValue,
	"MissingRequiredQueryParameter":       "A query parameter that's mandatory for this request is not specified.",
	"MissingRequiredHeader":               "An HTTP header that's mandatory for this request is not specified.",
	"InvalidUri":                          "The requested URI does not represent any resource on the server.",
	"ResourceNotFound":                    "The specified resource does not exist.",
	"UnsupportedHttpVerb":                 "The resource doesn't support specified Http Verb.",
	"InternalError":                       "Server encountered an internal error. Please try again after some time.",
	"OperationTimedOut":                   "The operation could not be completed within the permitted time.",
	"ServerBusy":                          "The server is currently unable to receive requests. Please retry your request.",
	"CorsPreflightFailure":                "CORS not enabled or no matching rule found for this request.",
}

func errorMessage(e *azq.Error) string {
	if e.Message == msgCORSHeaderMissing {
		// Azure's message for this case, not the code's usual one.
		return e.Message
	}
	if e.Code == "ServerBusy" {
		// Azure has a message for each reason of its own (faults.Reason);
		// any other, a back end's, may name what it runs on.
		for _, r := range faults.Reasons {
			if e.Message == r.Message() {
				return e.Message
			}
		}
	}
	if m, ok := azureMessages[e.Code]; ok {
		return m
	}
	return e.Message
}

// clientGone reports whether err is the cancellation of the request's
// context, which net/http cancels when the client closes the connection
// before its answer (or the server is made to stop serving). The back end
// gave up because nobody is waiting: it is not a server failure, and it
// is logged and counted as the client's (observe.NetworkError, Azure's
// NetworkError), never as 500 InternalError.
func (q *request) clientGone(err error) bool {
	return errors.Is(err, context.Canceled) && q.r.Context().Err() != nil
}

// timedOutError is a back end's error at the request's deadline, answered
// as Azure's 500 OperationTimedOut; it unwraps to the back end's error,
// which the log records.
type timedOutError struct {
	answer *azq.Error
	cause  error
}

func (e *timedOutError) Unwrap() []error { return []error{e.answer, e.cause} }

func (e *timedOutError) Error() string { return e.answer.Error() + ": " + e.cause.Error() }

func errOperationTimedOut(cause error) error {
	return &timedOutError{&azq.Error{Code: "OperationTimedOut", StatusCode: http.StatusInternalServerError,
		Message: azureMessages["OperationTimedOut"]}, cause}
}

func errInternal() *azq.Error {
	return &azq.Error{Code: "InternalError", StatusCode: http.StatusInternalServerError}
}

func errInvalidURI() *azq.Error {
	return &azq.Error{Code: "InvalidUri", StatusCode: http.StatusBadRequest, Message: azureMessages["InvalidUri"]}
}

// errResourceNotFound is 404 ResourceNotFound, Azure's answer for a
// resource (here: an account) it does not serve.
func errResourceNotFound() *azq.Error {
	return &azq.Error{Code: "ResourceNotFound", StatusCode: http.StatusNotFound, Message: azureMessages["ResourceNotFound"]}
}

func errUnsupportedVerb() *azq.Error {
	return &azq.Error{Code: "UnsupportedHttpVerb", StatusCode: http.StatusMethodNotAllowed}
}

func invalidQueryValue(name, value, reason string) *azq.Error {
	d := []azq.Detail{{Name: "QueryParameterName", Value: name}, {Name: "QueryParameterValue", Value: truncate(value, 256)}}
	if reason != "" {
		d = append(d, azq.Detail{Name: "Reason", Value: reason})
	}
	return &azq.Error{Code: azq.CodeInvalidQueryParameterValue, StatusCode: http.StatusBadRequest, Message: msgInvalidQueryValue, Details: d}
}

func missingQuery(name string) *azq.Error {
	return &azq.Error{Code: "MissingRequiredQueryParameter", StatusCode: http.StatusBadRequest,
		Details: []azq.Detail{{Name: "QueryParameterName", Value: name}}}
}

func outOfRange(name, value, min, max string) *azq.Error {
	d := []azq.Detail{{Name: "QueryParameterName", Value: name}, {Name: "QueryParameterValue", Value: truncate(value, 256)}}
	if min != "" {
		d = append(d, azq.Detail{Name: "MinimumAllowed", Value: min})
	}
	if max != "" {
		d = append(d, azq.Detail{Name: "MaximumAllowed", Value: max})
	}
	return &azq.Error{Code: azq.CodeOutOfRangeQueryParameterValue, StatusCode: http.StatusBadRequest, Details: d}
}

func bodyTooLarge(limit int) *azq.Error {
	return &azq.Error{Code: azq.CodeRequestBodyTooLarge, StatusCode: http.StatusRequestEntityTooLarge,
		Details: []azq.Detail{{Name: "MaxLimit", Value: strconv.Itoa(limit)}}}
}

// xmlErrorAt is Azure's answer to an XML body it parsed and then refused:
// the code with LineNumber, LinePosition and Reason, all three even when
// zero or empty, as Azure sends them.
func xmlErrorAt(code azq.ErrorCode, line, pos int, reason string) *azq.Error {
	return &azq.Error{Code: code, StatusCode: http.StatusBadRequest, Details: []azq.Detail{
		{Name: "LineNumber", Value: strconv.Itoa(line)},
		{Name: "LinePosition", Value: strconv.Itoa(pos)},
		{Name: "Reason", Value: reason},
	}}
}

func xmlError(code azq.ErrorCode, line, pos int, reason string) *azq.Error {
	e := &azq.Error{Code: code, StatusCode: http.StatusBadRequest}
	if line > 0 {
		e.Details = append(e.Details, azq.Detail{Name: "LineNumber", Value: strconv.Itoa(line)},
			azq.Detail{Name: "LinePosition", Value: strconv.Itoa(pos)})
	}
	if reason != "" {
		e.Details = append(e.Details, azq.Detail{Name: "Reason", Value: reason})
	}
	return e
}

// parseInt32 parses a decimal query parameter as Azure's Int32 parameters
// are parsed; anything else is InvalidQueryParameterValue.
func parseInt32(name, v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, invalidQueryValue(name, v, "")
	}
	return int(n), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// validXMLName reports whether s can be written as an element name.
func validXMLName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.'):
		case c > 0x7f && (c >= 0xC0 && c <= 0x2FF || c >= 0x370 && c <= 0x1FFF && c != 0x37E || c >= 0x3001 && c <= 0xD7FF || c >= 0xF900 && c <= 0xFDCF):
		default:
			return false
		}
	}
	return true
}

// appendEscaped appends s as XML character data. Characters XML cannot
// carry (invalid UTF-8, most control characters) become U+FFFD; carriage
// returns are written as references so that they survive parsing.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			var esc string
			switch c {
			case '&':
				esc = "&amp;"
			case '<':
				esc = "&lt;"
			case '>':
				esc = "&gt;"
			case '"':
				esc = "&quot;"
			case '\'':
				esc = "&apos;"
			case '\r':
				esc = "&#xD;"
			case '\t', '\n':
			default:
				if c < 0x20 {
					esc = "\uFFFD"
				}
			}
			if esc != "" {
				b = append(b, s[start:i]...)
				b = append(b, esc...)
				start = i + 1
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !isXMLChar(r) {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			start = i + size
		}
		i += size
	}
	return append(b, s[start:]...)
}

func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
