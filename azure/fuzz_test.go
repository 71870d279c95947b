package azure

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/azqlib/azq"
)

// The service's Error body is outside input: whatever it holds, parsing
// it must not panic, must keep a code it already has, must not invent
// details from anything but the Error element's children, and must give
// a one-line message.
func FuzzParseErrorBody(f *testing.F) {
	f.Add(`<?xml version="1.0" encoding="utf-8"?><Error><Code>MessageNotFound</Code><Message>The specified message does not exist.
RequestId:5e1f9a8c-0003-0042-7ffb-0123456789ab
Time:2026-11-24T10:00:00.0000000Z</Message></Error>`, "")
	f.Add(`<Error><Code>OutOfRangeQueryParameterValue</Code><Message>m</Message><QueryParameterName>numofmessages</QueryParameterName><QueryParameterValue>33</QueryParameterValue><MinimumAllowed>1</MinimumAllowed><MaximumAllowed>32</MaximumAllowed></Error>`, "OutOfRangeQueryParameterValue")
	f.Add(`<Error><Code>InvalidQueryParameterValue</Code><QueryParameterName>popreceipt</QueryParameterName><Reason>Invalid pop receipt format</Reason></Error>`, "")
	f.Add(`<Error><AuthenticationErrorDetail>Signature did not match. String to sign used was &#xA;GET</AuthenticationErrorDetail><Nested><Deeper>x</Deeper></Nested></Error>`, "AuthenticationFailed")
	f.Add(`{"error":{"code":"InternalError"}}`, "")
	f.Add(`<NotError><Code>X</Code></NotError>`, "")
	f.Add(`<Error><Code>`, "")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, body, code string) {
		e := &azq.Error{Code: azq.ErrorCode(code)}
		parseErrorBody([]byte(body), e)
		if code != "" && string(e.Code) != code {
			t.Fatalf("code %q replaced by %q", code, e.Code)
		}
		if strings.Contains(e.Message, "\n") {
			t.Fatalf("message %q has more than one line", e.Message)
		}
		if len(e.Details) > 0 && !strings.Contains(body, "Error") {
			t.Fatalf("details %v from a body without an Error element", e.Details)
		}
		for _, d := range e.Details {
			if d.Name == "Code" || d.Name == "Message" || d.Name == "" || !utf8.ValidString(d.Value) && utf8.ValidString(body) {
				t.Fatalf("detail %+v", d)
			}
		}
	})
}
