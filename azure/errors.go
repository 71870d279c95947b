package azure

import (
	"bytes"
	"encoding/xml"
	"errors"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/azqlib/azq"
)

// responseError is an error answer of the service as the adapter returns
// it: an *azq.Error with the service's code, status, message and details,
// which matches azq's sentinels by code, and the SDK's
// *azcore.ResponseError with the raw response. errors.As finds either.
type responseError struct {
	azq  *azq.Error
	resp *azcore.ResponseError
	// also is a sentinel the answer matches besides those of its code,
	// as the request it answered tells (see mapACLError); nil if none.
	also *azq.Error
}

func (e *responseError) Error() string   { return e.azq.Error() }
func (e *responseError) Unwrap() []error { return []error{e.azq, e.resp} }

// Is reports whether target is the sentinel e also matches.
func (e *responseError) Is(target error) bool { return e.also != nil && target == e.also }

// mapError turns an error answer of the service into a responseError and
// returns any other error (a transport failure, a cancelled context)
// unchanged.
func mapError(err error) error {
	var re *azcore.ResponseError
	if err == nil || !errors.As(err, &re) {
		return err
	}
	return &responseError{azq: toAzqError(re), resp: re}
}

// mapACLError is mapError for Set Queue ACL. Azure refuses policies that
// break its rules with InvalidXmlDocument, a code that elsewhere means
// any malformed body; here the body is the policies the adapter wrote,
// so the answer also matches azq.ErrInvalidAccessPolicy.
func mapACLError(err error) error {
	err = mapError(err)
	var re *responseError
	if errors.As(err, &re) && re.azq.Code == azq.CodeInvalidXMLDocument {
		re.also = azq.ErrInvalidAccessPolicy
	}
	return err
}

// toAzqError builds the *azq.Error of a service error answer: the code
// from the x-ms-error-code header (else the body's Code), the status,
// and the message and detail elements of the Error XML body, in order.
func toAzqError(re *azcore.ResponseError) *azq.Error {
	e := &azq.Error{Code: azq.ErrorCode(re.ErrorCode), StatusCode: re.StatusCode}
	var reqID string
	if r := re.RawResponse; r != nil {
		reqID = r.Header.Get("x-ms-request-id")
		if body, err := runtime.Payload(r); err == nil {
			parseErrorBody(body, e)
		}
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(re.StatusCode))
		if e.Message == "" {
			e.Message = "the service answered with an error"
		}
	}
	if reqID != "" {
		e.Message += " (request " + reqID + ")"
	}
	return e
}

// parseErrorBody reads Azure's Error XML into e: the code if e has none,
// the first line of the message (the rest repeats the request ID and the
// time), and every other child element as a detail. A body that is not
// such XML leaves e as it is.
func parseErrorBody(body []byte, e *azq.Error) {
	if len(body) == 0 {
		return
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	depth := 0
	var name string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 && t.Name.Local != "Error" {
				return
			}
			if depth == 2 {
				name = t.Name.Local
				text.Reset()
			}
		case xml.CharData:
			if depth == 2 {
				text.Write(t)
			}
		case xml.EndElement:
			if depth == 2 {
				v := strings.TrimSpace(text.String())
				switch name {
				case "Code":
					if e.Code == "" {
						e.Code = azq.ErrorCode(v)
					}
				case "Message":
					v, _, _ = strings.Cut(v, "\n")
					e.Message = strings.TrimSpace(v)
				default:
					e.Details = append(e.Details, azq.Detail{Name: name, Value: v})
				}
			}
			depth--
			if depth == 0 {
				return
			}
		}
	}
}
