package azq

import (
	"encoding/json"
	"errors"
	"fmt"

	"testing"
	"time"
)

// TestOutsideErrorsMatchSentinels: an *Error built outside the package, as a
// client of a remote queue service builds one from a REST response, matches
// the sentinel of its Azure code, and failing that, of its status.
func TestOutsideErrorsMatchSentinels(t *testing.T) {
	all := []*Error{ErrMessageNotFound, ErrQueueNotFound, ErrQueueAlreadyExists, ErrMessageTooLarge,
		ErrInvalidArgument, ErrOutOfRange, ErrInvalidPopReceipt, ErrInvalidQueueName, ErrInvalidMetadata,
		ErrInvalidMarker, ErrInvalidAccessPolicy}
	for _, tc := range []struct {
		code    ErrorCode
		status  int
		details []Detail
		want    []*Error // every sentinel it must match; it must match no other
	}{
		{CodeMessageNotFound, 404, nil, []*Error{ErrMessageNotFound}},
		{CodePopReceiptMismatch, 400, nil, []*Error{ErrMessageNotFound}},
		{CodeQueueNotFound, 404, nil, []*Error{ErrQueueNotFound}},
		{CodeQueueAlreadyExists, 409, nil, []*Error{ErrQueueAlreadyExists}},
		{CodeRequestBodyTooLarge, 413, nil, []*Error{ErrMessageTooLarge}},
		{CodeMessageTooLarge, 400, nil, []*Error{ErrMessageTooLarge}},
		{CodeInvalidQueryParameterValue, 400, nil, []*Error{ErrInvalidArgument}},
		{CodeInvalidQueryParameterValue, 400, []Detail{{"QueryParameterName", "popreceipt"}},
			[]*Error{ErrInvalidPopReceipt, ErrInvalidArgument}},
		{CodeOutOfRangeQueryParameterValue, 400, nil, []*Error{ErrOutOfRange, ErrInvalidArgument}},
		{CodeInvalidResourceName, 400, nil, []*Error{ErrInvalidQueueName, ErrInvalidArgument}},
		{CodeInvalidMetadata, 400, nil, []*Error{ErrInvalidMetadata, ErrInvalidArgument}},
		{CodeEmptyMetadataKey, 400, nil, []*Error{ErrInvalidMetadata, ErrInvalidArgument}},
		{CodeMetadataTooLarge, 400, nil, []*Error{ErrInvalidMetadata, ErrInvalidArgument}},
		{CodeInvalidMarker, 400, nil, []*Error{ErrInvalidMarker, ErrInvalidArgument}},
		// Codes azq does not list match by status.
		{"MissingRequiredQueryParameter", 400, nil, []*Error{ErrInvalidArgument}},
		{"MissingRequiredQueryParameter", 400, []Detail{{"QueryParameterName", "popreceipt"}},
			[]*Error{ErrInvalidPopReceipt, ErrInvalidArgument}},
		{"InvalidHeaderValue", 400, nil, []*Error{ErrInvalidArgument}},
		{CodeOutOfRangeInput, 400, nil, []*Error{ErrInvalidArgument}},
		{CodeInvalidXMLDocument, 400, nil, []*Error{ErrInvalidArgument}},
		{CodeQueueBeingDeleted, 409, nil, nil},
		{CodeQueueDisabled, 409, nil, nil},
		{"AuthenticationFailed", 403, nil, nil},
		{"ServerBusy", 503, nil, nil},
		{"InternalError", 500, nil, nil},
	} {
		t.Run(fmt.Sprintf("%s_%d", tc.code, tc.status), func(t *testing.T) {
			e := &Error{Code: tc.code, StatusCode: tc.status, Message: "from a REST response", Details: tc.details}
			// Wrapped, as a client adds context to it.
			err := fmt.Errorf("put: %w", e)
			for _, s := range all {
				want := false
				for _, w := range tc.want {
					want = want || w == s
				}
				if got := errors.Is(err, s); got != want {
					t.Errorf("errors.Is(%s, %s) = %v, want %v", tc.code, s.Code, got, want)
				}
			}
		})
	}
}

// TestCoreErrorsMatchOnlyTheirKind: the core's own errors keep matching
// exactly the sentinels they were made from, whatever their code says; in
// particular a queue name of the wrong length (OutOfRangeInput) is still
// ErrInvalidQueueName.
func TestCoreErrorsMatchOnlyTheirKind(t *testing.T) {
	err := ValidateQueueName("ab")
	if !errors.Is(err, ErrInvalidQueueName) || !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrOutOfRange) {
		t.Errorf("short queue name: %v matches the wrong sentinels", err)
	}
	for _, s := range []*Error{ErrMessageNotFound, ErrQueueNotFound, ErrInvalidArgument, ErrOutOfRange} {
		if !errors.Is(s, s) {
			t.Errorf("errors.Is(%s, itself) = false", s.Code)
		}
	}
	if errors.Is(ErrMessageNotFound, ErrQueueNotFound) || errors.Is(ErrInvalidArgument, ErrOutOfRange) {
		t.Error("a sentinel matches another")
	}
	var nilErr *Error
	if errors.Is(ErrMessageNotFound, nilErr) {
		t.Error("a sentinel matches a nil *Error")
	}
}

// TestRemotePopReceipt: a receipt another service issued is carried
// unchanged, round-trips through its text and JSON forms, and an in-memory
// queue refuses it with MessageNotFound without harm to the message.
func TestRemotePopReceipt(t *testing.T) {
	const azure = "AgAAAAMAAAAAAAAAxVkNR+xc2gE="
	r := RemotePopReceipt(azure)
	if !r.IsRemote() || r.IsZero() || r.String() != azure {
		t.Fatalf("RemotePopReceipt(%q): remote %v, zero %v, text %q", azure, r.IsRemote(), r.IsZero(), r.String())
	}
	if z := RemotePopReceipt(""); !z.IsZero() || z.IsRemote() {
		t.Errorf("RemotePopReceipt(\"\") is not the zero receipt")
	}
	if _, err := ParsePopReceipt(azure); !errors.Is(err, ErrInvalidPopReceipt) {
		t.Errorf("ParsePopReceipt(Azure's receipt) = %v; want ErrInvalidPopReceipt (it reads azq's own)", err)
	}

	type held struct {
		ID      MessageID
		Receipt PopReceipt
	}
	q, clk := newMockQueue(t)
	m := mustPut(t, q, "job", nil)
	for _, h := range []held{{m.ID, r}, {m.ID, m.PopReceipt}} {
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var back held
		if err := json.Unmarshal(b, &back); err != nil || back != h {
			t.Fatalf("JSON round trip of %s: %+v, %v; want %+v", b, back, err, h)
		}
	}

	if err := q.Delete(ctx, m.ID, r); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("Delete with a remote receipt = %v, want ErrMessageNotFound", err)
	}
	if _, err := q.Update(ctx, m.ID, r, time.Minute, nil); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("Update with a remote receipt = %v, want ErrMessageNotFound", err)
	}
	// The message is untouched and its own receipt still works.
	clk.Add(time.Second)
	if got, err := q.Peek(ctx, 1); err != nil || len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("Peek after refused receipts = %v, %v", got, err)
	}
	if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
		t.Fatalf("Delete with the message's own receipt: %v", err)
	}
}
