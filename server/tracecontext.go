package server

import "log/slog"

// This file reads the W3C Trace Context header a client sends
// (https://www.w3.org/TR/trace-context/), for the request's log record:
// an Azure SDK with tracing on sends one, and its trace-id finds the
// request in the server's log.

// maxTraceparent bounds the traceparent header the server looks at: the
// version 00 form is 55 characters, and a later version may only append
// fields to it.
const maxTraceparent = 512

// traceparent is the parsed traceparent header.
type traceparent struct {
	traceID  string // 32 lower-case hex digits, not all zero
	parentID string // 16 lower-case hex digits, not all zero
}

// parseTraceparent parses a traceparent header value as the
// specification's rules for a receiver have it: version (two hex digits,
// not ff), trace-id, parent-id and flags separated by dashes; version 00
// has exactly those, a later version may have more after a dash. ok is
// false for anything else, which the caller treats as no trace context.
func parseTraceparent(v string) (tp traceparent, ok bool) {
	if len(v) < 55 || len(v) > maxTraceparent {
		return traceparent{}, false
	}
	if !isLowerHex(v[0:2]) || v[0:2] == "ff" || v[2] != '-' || v[35] != '-' || v[52] != '-' || !isLowerHex(v[53:55]) {
		return traceparent{}, false
	}
	if v[0:2] == "00" && len(v) != 55 || len(v) > 55 && v[55] != '-' {
		return traceparent{}, false
	}
	tid, pid := v[3:35], v[36:52]
	if !isLowerHex(tid) || !isLowerHex(pid) || allZero(tid) || allZero(pid) {
		return traceparent{}, false
	}
	return traceparent{traceID: tid, parentID: pid}, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// maxLoggedHeader is the most of a client's header value a log record
// holds.
const maxLoggedHeader = 256

// traceAttrs appends the request's trace context to a log record:
// trace_id and parent_id when the client sent a valid traceparent;
// traceparent_invalid with the start of what it sent when it is not
// valid (or sent more than once); nothing when it sent none. It never
// fails the request: the trace context is only logged.
func (q *request) traceAttrs(attrs []slog.Attr) []slog.Attr {
	vs := q.r.Header["Traceparent"]
	if len(vs) == 0 {
		return attrs
	}
	if len(vs) == 1 {
		if tp, ok := parseTraceparent(vs[0]); ok {
			return append(attrs, slog.String("trace_id", tp.traceID), slog.String("parent_id", tp.parentID))
		}
	}
	return append(attrs, slog.String("traceparent_invalid", truncate(vs[0], maxLoggedHeader)))
}
