package azure_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
	"github.com/azqlib/azq"
	"github.com/azqlib/azq/azure"
)

// sentinels are every sentinel of azq, to check that an error matches
// the ones it should and no other.
var sentinels = map[string]*azq.Error{
	"ErrMessageNotFound":     azq.ErrMessageNotFound,
	"ErrQueueNotFound":       azq.ErrQueueNotFound,
	"ErrQueueAlreadyExists":  azq.ErrQueueAlreadyExists,
	"ErrMessageTooLarge":     azq.ErrMessageTooLarge,
	"ErrInvalidArgument":     azq.ErrInvalidArgument,
	"ErrOutOfRange":          azq.ErrOutOfRange,
	"ErrInvalidPopReceipt":   azq.ErrInvalidPopReceipt,
	"ErrInvalidQueueName":    azq.ErrInvalidQueueName,
	"ErrInvalidMetadata":     azq.ErrInvalidMetadata,
	"ErrInvalidMarker":       azq.ErrInvalidMarker,
	"ErrInvalidAccessPolicy": azq.ErrInvalidAccessPolicy,
}

// errorCodes is every error code the queue service can answer with (the
// SDK's queueerror codes, plus NoAuthenticationInformation, which the SDK
// does not list), with the status it comes with and the sentinels an
// error with that code must match, and no others. A code that matches
// none (authorization, throttling, server faults, conflicts other than
// an existing queue) is still an *azq.Error with its code.
var errorCodes = []struct {
	code    string
	status  int
	matches []string
	details string // extra detail elements of the Error body
}{
	{"AccountAlreadyExists", 409, nil, ""},
	{"AccountBeingCreated", 409, nil, ""},
	{"AccountIsDisabled", 403, nil, ""},
	{"AuthenticationFailed", 403, nil, "<AuthenticationErrorDetail>signature mismatch</AuthenticationErrorDetail>"},
	{"AuthorizationFailure", 403, nil, ""},
	{"AuthorizationPermissionMismatch", 403, nil, ""},
	{"AuthorizationProtocolMismatch", 403, nil, ""},
	{"AuthorizationResourceTypeMismatch", 403, nil, ""},
	{"AuthorizationServiceMismatch", 403, nil, ""},
	{"AuthorizationSourceIPMismatch", 403, nil, ""},
	{"ConditionHeadersNotSupported", 400, []string{"ErrInvalidArgument"}, ""},
	{"ConditionNotMet", 412, nil, ""},
	{"EmptyMetadataKey", 400, []string{"ErrInvalidMetadata", "ErrInvalidArgument"}, ""},
	{"FeatureVersionMismatch", 409, nil, ""},
	{"InsufficientAccountPermissions", 403, nil, ""},
	{"InternalError", 500, nil, ""},
	{"InvalidAuthenticationInfo", 401, nil, ""},
	{"InvalidHttpVerb", 400, []string{"ErrInvalidArgument"}, ""},
	{"InvalidHeaderValue", 400, []string{"ErrInvalidArgument"}, "<HeaderName>x-ms-version</HeaderName><HeaderValue>1999-01-01</HeaderValue>"},
	{"InvalidInput", 400, []string{"ErrInvalidArgument"}, ""},
	{"InvalidMd5", 400, []string{"ErrInvalidArgument"}, ""},
	{"InvalidMarker", 400, []string{"ErrInvalidMarker", "ErrInvalidArgument"}, ""},
	{"InvalidMetadata", 400, []string{"ErrInvalidMetadata", "ErrInvalidArgument"}, ""},
	{"InvalidQueryParameterValue", 400, []string{"ErrInvalidArgument"}, "<QueryParameterName>visibilitytimeout</QueryParameterName><QueryParameterValue>x</QueryParameterValue>"},
	{"InvalidRange", 416, nil, ""},
	{"InvalidResourceName", 400, []string{"ErrInvalidQueueName", "ErrInvalidArgument"}, ""},
	{"InvalidUri", 400, []string{"ErrInvalidArgument"}, ""},
	{"InvalidXmlDocument", 400, []string{"ErrInvalidArgument"}, "<LineNumber>1</LineNumber><LinePosition>2</LinePosition><Reason>bad</Reason>"},
	{"InvalidXmlNodeValue", 400, []string{"ErrInvalidArgument"}, ""},
	{"Md5Mismatch", 400, []string{"ErrInvalidArgument"}, ""},
	{"MessageNotFound", 404, []string{"ErrMessageNotFound"}, ""},
	{"MessageTooLarge", 400, []string{"ErrMessageTooLarge"}, ""},
	{"MetadataTooLarge", 400, []string{"ErrInvalidMetadata", "ErrInvalidArgument"}, ""},
	{"MissingContentLengthHeader", 411, nil, ""},
	{"MissingRequiredHeader", 400, []string{"ErrInvalidArgument"}, ""},
	{"MissingRequiredQueryParameter", 400, []string{"ErrInvalidArgument"}, ""},
	// A missing pop receipt is a receipt error too, as the in-memory
	// queue's zero receipt is.
	{"MissingRequiredQueryParameter", 400, []string{"ErrInvalidPopReceipt", "ErrInvalidArgument"}, "<QueryParameterName>popreceipt</QueryParameterName>"},
	{"MissingRequiredXmlNode", 400, []string{"ErrInvalidArgument"}, ""},
	{"MultipleConditionHeadersNotSupported", 400, []string{"ErrInvalidArgument"}, ""},
	{"NoAuthenticationInformation", 401, nil, ""},
	{"OperationTimedOut", 500, nil, ""},
	{"OutOfRangeInput", 400, []string{"ErrInvalidArgument"}, ""},
	{"OutOfRangeQueryParameterValue", 400, []string{"ErrOutOfRange", "ErrInvalidArgument"}, "<QueryParameterName>numofmessages</QueryParameterName><QueryParameterValue>33</QueryParameterValue><MinimumAllowed>1</MinimumAllowed><MaximumAllowed>32</MaximumAllowed>"},
	{"PopReceiptMismatch", 400, []string{"ErrMessageNotFound"}, ""},
	{"QueueAlreadyExists", 409, []string{"ErrQueueAlreadyExists"}, ""},
	{"QueueBeingDeleted", 409, nil, ""},
	{"QueueDisabled", 409, nil, ""},
	{"QueueNotEmpty", 409, nil, ""},
	{"QueueNotFound", 404, []string{"ErrQueueNotFound"}, ""},
	{"RequestBodyTooLarge", 413, []string{"ErrMessageTooLarge"}, "<MaxLimit>65536</MaxLimit>"},
	{"RequestUrlFailedToParse", 400, []string{"ErrInvalidArgument"}, ""},
	{"ResourceAlreadyExists", 409, nil, ""},
	{"ResourceNotFound", 404, nil, ""},
	{"ResourceTypeMismatch", 409, nil, ""},
	{"ServerBusy", 503, nil, ""},
	{"UnsupportedHttpVerb", 405, nil, ""},
	{"UnsupportedHeader", 400, []string{"ErrInvalidArgument"}, ""},
	{"UnsupportedQueryParameter", 400, []string{"ErrInvalidArgument"}, ""},
	{"UnsupportedXmlNode", 400, []string{"ErrInvalidArgument"}, ""},
	// A malformed pop receipt.
	{"InvalidQueryParameterValue", 400, []string{"ErrInvalidPopReceipt", "ErrInvalidArgument"}, "<QueryParameterName>popreceipt</QueryParameterName><Reason>Invalid pop receipt format</Reason>"},
}

// cannedTransport answers every request with one canned response, as the
// service would, so that the whole SDK pipeline and the adapter's mapping
// run on it.
type cannedTransport struct {
	status int
	header http.Header
	body   string
}

func (c cannedTransport) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: c.status,
		Status:     http.StatusText(c.status),
		Header:     c.header.Clone(),
		Body:       io.NopCloser(strings.NewReader(c.body)),
		Request:    req,
	}, nil
}

// cannedQueue returns a queue whose every request gets t's response,
// with retries off so that 5xx answers surface at once.
func cannedQueue(t *testing.T, tr cannedTransport) *azure.Queue {
	t.Helper()
	q, err := azure.NewQueueFromConnectionString(devConn("http://127.0.0.1:1/devstoreaccount1"), "jobs",
		&azure.Options{ClientOptions: &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: tr, Retry: policy.RetryOptions{MaxRetries: -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// devConn is the development account's connection string at endpoint.
func devConn(endpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
		"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
		"QueueEndpoint=" + endpoint + ";"
}

// Every error code the service can answer with comes back from the
// adapter as an *azq.Error with that code, status, message and details,
// matching exactly the sentinels a caller would check with errors.Is,
// and still as the SDK's *azcore.ResponseError.
func TestErrorCodesMapToSentinels(t *testing.T) {
	for _, tc := range errorCodes {
		t.Run(tc.code+"/"+tc.details, func(t *testing.T) {
			body := `<?xml version="1.0" encoding="utf-8"?><Error><Code>` + tc.code + `</Code>` +
				"<Message>Something about " + tc.code + ".\nRequestId:5e1f9a8c-0003-0042-7ffb-0123456789ab\nTime:2026-11-24T10:00:00.0000000Z</Message>" +
				tc.details + `</Error>`
			h := http.Header{}
			h.Set("x-ms-error-code", tc.code)
			h.Set("x-ms-request-id", "5e1f9a8c-0003-0042-7ffb-0123456789ab")
			h.Set("Content-Type", "application/xml")
			q := cannedQueue(t, cannedTransport{status: tc.status, header: h, body: body})
			_, err := q.Get(context.Background(), 1, 0)
			checkMapped(t, err, tc.code, tc.status, tc.matches)

			var ae *azq.Error
			errors.As(err, &ae)
			if !strings.HasPrefix(ae.Message, "Something about "+tc.code+".") || !strings.Contains(ae.Message, "5e1f9a8c-0003-0042-7ffb-0123456789ab") || strings.Contains(ae.Message, "Time:") {
				t.Errorf("message %q: want the service's first line and the request ID", ae.Message)
			}
			var want []azq.Detail
			for _, m := range regexp.MustCompile(`<(\w+)>([^<]*)</\w+>`).FindAllStringSubmatch(tc.details, -1) {
				want = append(want, azq.Detail{Name: m[1], Value: m[2]})
			}
			if len(ae.Details) != len(want) {
				t.Fatalf("details %v, want %v", ae.Details, want)
			}
			for i := range want {
				if ae.Details[i] != want[i] {
					t.Fatalf("details %v, want %v", ae.Details, want)
				}
			}
		})
	}
}

// checkMapped checks that err is the adapter's error for code and status
// and matches exactly the named sentinels.
func checkMapped(t *testing.T, err error, code string, status int, matches []string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var ae *azq.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%v: not an *azq.Error", err)
	}
	if string(ae.Code) != code || ae.StatusCode != status {
		t.Fatalf("code %q status %d, want %q %d", ae.Code, ae.StatusCode, code, status)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.ErrorCode != code || re.RawResponse == nil {
		t.Fatalf("%v: not the SDK's ResponseError for %s", err, code)
	}
	if !queueerror.HasCode(err, queueerror.Code(code)) {
		t.Fatalf("queueerror.HasCode(%s) is false", code)
	}
	for name, s := range sentinels {
		want := false
		for _, m := range matches {
			want = want || m == name
		}
		if got := errors.Is(err, s); got != want {
			t.Errorf("errors.Is(err, azq.%s) = %v, want %v", name, got, want)
		}
	}
}

// The table above covers every code the SDK knows, so that an SDK
// upgrade that adds one fails here until the code is mapped and tested.
func TestErrorCodesCoverTheSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(string(bytes.TrimSpace(out)), "error_codes.go"))
	if err != nil {
		t.Fatal(err)
	}
	covered := make(map[string]bool)
	for _, tc := range errorCodes {
		covered[tc.code] = true
	}
	codes := regexp.MustCompile(`(?m)^\s+\w+\s+Code = "(\w+)"`).FindAllSubmatch(src, -1)
	if len(codes) < 50 {
		t.Fatalf("found only %d codes in the SDK's queueerror package", len(codes))
	}
	for _, c := range codes {
		if !covered[string(c[1])] {
			t.Errorf("the SDK's code %s is not in the mapping table", c[1])
		}
	}
}

// Answers without an Error body or without x-ms-error-code still map:
// the code comes from whichever carries it, the sentinel from the code
// or, without one, the status.
func TestErrorsWithoutHeaderOrBody(t *testing.T) {
	xmlBody := `<?xml version="1.0" encoding="utf-8"?><Error><Code>MessageNotFound</Code><Message>gone</Message></Error>`
	cases := []struct {
		name    string
		status  int
		header  string
		body    string
		code    string
		matches []string
	}{
		{"code only in the body", 404, "", xmlBody, "MessageNotFound", []string{"ErrMessageNotFound"}},
		{"code only in the header", 404, "QueueNotFound", "", "QueueNotFound", []string{"ErrQueueNotFound"}},
		{"bad request without a code", 400, "", "", "", []string{"ErrInvalidArgument"}},
		{"not found without a code", 404, "", "", "", nil},
		{"a body that is not XML", 400, "InvalidInput", "<<<not xml", "InvalidInput", []string{"ErrInvalidArgument"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("x-ms-error-code", tc.header)
			}
			q := cannedQueue(t, cannedTransport{status: tc.status, header: h, body: tc.body})
			err := q.Delete(context.Background(), unknownID, azq.RemotePopReceipt("r"))
			checkMapped(t, err, tc.code, tc.status, tc.matches)
		})
	}
}
