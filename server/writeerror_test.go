package server_test

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/server"
)

// WriteError answers as the server itself answers an error: status, error
// code header, request ID, the version asked for, and the Error XML with
// escaped message and details, but no body to HEAD.
func TestWriteError(t *testing.T) {
	e := &azq.Error{Code: "NotImplemented", StatusCode: http.StatusNotImplemented,
		Message: `blobs <are> "not" served & never stored`,
		Details: []azq.Detail{{Name: "Reason", Value: "a<b"}}}
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut} {
		r := httptest.NewRequest(method, "/devstoreaccount1/container?restype=container", nil)
		r.Header.Set("x-ms-version", "2026-04-06")
		w := httptest.NewRecorder()
		server.WriteError(w, r, e)
		res := w.Result()
		if res.StatusCode != 501 || res.Header.Get("x-ms-error-code") != "NotImplemented" ||
			res.Header.Get("x-ms-request-id") == "" || res.Header.Get("x-ms-version") != "2026-04-06" {
			t.Fatalf("%s: status %d, headers %v", method, res.StatusCode, res.Header)
		}
		body := w.Body.String()
		if method == http.MethodHead {
			if body != "" {
				t.Fatalf("HEAD answered with a body: %q", body)
			}
			continue
		}
		var doc struct {
			Code    string
			Message string
			Reason  string
		}
		if err := xml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: body %q is not XML: %v", method, body, err)
		}
		if doc.Code != "NotImplemented" || !strings.HasPrefix(doc.Message, e.Message+"\nRequestId:") || doc.Reason != "a<b" {
			t.Fatalf("%s: Error document %+v", method, doc)
		}
	}
}
