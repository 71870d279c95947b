package azq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
)

// checkAzqErr fails unless err is an *azq.Error matching sentinel with
// errors.Is and carrying exactly code and the sentinel's HTTP status.
func checkAzqErr(t *testing.T, what string, err error, sentinel *azq.Error, code azq.ErrorCode) {
	t.Helper()
	var e *azq.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T) is not an *azq.Error", what, err, err)
	}
	if !errors.Is(err, sentinel) || e.Code != code || e.StatusCode != sentinel.StatusCode {
		t.Fatalf("%s: error %v (code %s, status %d), want %s, %d", what, err, e.Code, e.StatusCode, code, sentinel.StatusCode)
	}
}

// FuzzParsePopReceipt: ParsePopReceipt never panics; text it accepts is
// exactly the String of the receipt it returns (so the text form is
// canonical and round-trips), and text it refuses gives ErrInvalidPopReceipt
// with Azure's InvalidQueryParameterValue and the zero receipt, while
// UnmarshalText keeps that text as a remote receipt.
func FuzzParsePopReceipt(f *testing.F) {
	for _, s := range []string{
		"",
		"AQAAAAAAAAAAAAAAAAAAAAAA",     // format 1, slot 0, version 0, tag 0
		"AQAAAAEAAAACAAAAAAAAAAM=",     // 24 characters with padding
		"AgAAAAMAAAAAAAAAxVkNR+xc2gE=", // an Azure receipt (28 characters)
		"AQAAAAEAAAACAAAAAAAAAAM",      // padding missing
		"AQAAAAEAAAACAAAAAAAAAAN=",     // non-zero padding bits
		"AQAAAAEAAAACAAAAAAAAAA M=",    // '+' decoded to a space by a careless URL decoder
		"AQAAAAEAAAACAAAAAAAAAA-=",     // URL alphabet
		"AAAAAAAAAAAAAAAAAAAAAAA=",     // format 0
		"/////////////////////w==",
		"AQAAAAEAAAACAAAAAAAAAAM=\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := azq.ParsePopReceipt(s)
		if err != nil {
			checkAzqErr(t, "ParsePopReceipt", err, azq.ErrInvalidPopReceipt, azq.CodeInvalidQueryParameterValue)
			if !errors.Is(err, azq.ErrInvalidArgument) {
				t.Fatalf("ParsePopReceipt(%q): %v does not match ErrInvalidArgument", s, err)
			}
			if !r.IsZero() {
				t.Fatalf("ParsePopReceipt(%q) failed but returned a receipt", s)
			}
			// What is not azq's own receipt is kept as a remote one,
			// unchanged, so that a remote service's receipt round-trips.
			var u azq.PopReceipt
			if err := u.UnmarshalText([]byte(s)); err != nil {
				t.Fatalf("UnmarshalText(%q) = %v", s, err)
			}
			if u.String() != s || u.IsRemote() != (s != "") || u.IsZero() != (s == "") {
				t.Fatalf("UnmarshalText(%q) gave %q (remote %v, zero %v); want the text kept as a remote receipt",
					s, u.String(), u.IsRemote(), u.IsZero())
			}
			return
		}
		if r.IsZero() {
			t.Fatalf("ParsePopReceipt(%q) returned the zero receipt", s)
		}
		if r.String() != s {
			t.Fatalf("ParsePopReceipt(%q).String() = %q", s, r.String())
		}
		b, err := r.MarshalText()
		if err != nil || string(b) != s {
			t.Fatalf("MarshalText = %q, %v; want %q", b, err, s)
		}
		var u azq.PopReceipt
		if err := u.UnmarshalText(b); err != nil || u != r {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", b, u, err, r)
		}
	})
}

// FuzzParseMessageID: ParseMessageID never panics; an ID it accepts prints
// in the canonical 36-character lower-case form, which parses back to the
// same ID; text it refuses gives ErrMessageNotFound (404 MessageNotFound),
// as Azure answers for an ID that cannot name a message.
func FuzzParseMessageID(f *testing.F) {
	for _, s := range []string{
		"",
		"663d89aa-d1d9-42a2-9a6a-fcf822a97d2c",
		"663D89AA-D1D9-42A2-9A6A-FCF822A97D2C",
		"663d89aad1d942a29a6afcf822a97d2c",
		"{663d89aa-d1d9-42a2-9a6a-fcf822a97d2c}",
		"urn:uuid:663d89aa-d1d9-42a2-9a6a-fcf822a97d2c",
		"663d89aa-d1d9-42a2-9a6a-fcf822a97d2",
		"663d89aa-d1d9-42a2-9a6a-fcf822a97d2g",
		"663d89aa_d1d9_42a2_9a6a_fcf822a97d2c",
		"00000000-0000-0000-0000-000000000000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := azq.ParseMessageID(s)
		if err != nil {
			checkAzqErr(t, "ParseMessageID", err, azq.ErrMessageNotFound, azq.CodeMessageNotFound)
			if !id.IsZero() {
				t.Fatalf("ParseMessageID(%q) failed but returned an ID", s)
			}
			return
		}
		c := id.String()
		if len(c) != 36 || c[8] != '-' || c[13] != '-' || c[18] != '-' || c[23] != '-' {
			t.Fatalf("ParseMessageID(%q).String() = %q, not canonical", s, c)
		}
		for _, ch := range c {
			if ch != '-' && !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
				t.Fatalf("ParseMessageID(%q).String() = %q, not lower-case hex", s, c)
			}
		}
		back, err := azq.ParseMessageID(c)
		if err != nil || back != id {
			t.Fatalf("ParseMessageID(%q) = %v, %v; want %v", c, back, err, id)
		}
		if isCanonicalID(s) && c != s {
			t.Fatalf("canonical ID %q prints as %q", s, c)
		}
		var u azq.MessageID
		if b, err := id.MarshalText(); err != nil || u.UnmarshalText(b) != nil || u != id {
			t.Fatalf("MarshalText/UnmarshalText of %v do not round-trip", id)
		}
	})
}

func isCanonicalID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, ch := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if ch != '-' {
				return false
			}
		case '0' <= ch && ch <= '9', 'a' <= ch && ch <= 'f':
		default:
			return false
		}
	}
	return true
}

// FuzzDeleteWithReceipt sends receipt text against a queue holding messages
// in every receipt state: fresh from Put, dequeued, dequeued again after its
// lease lapsed, updated, and dequeued then expired. The text is tried as
// given against every message, and also as a bit-flipped variant of one
// message's current receipt, which reaches the slot, version and tag checks.
// Delete must never panic, and must never delete a message unless the
// receipt is that message's current one; refusals must be
// ErrInvalidPopReceipt for malformed text and ErrMessageNotFound otherwise.
// Afterwards every surviving message must still be deletable with its
// current receipt, and the count must be exact.
func FuzzDeleteWithReceipt(f *testing.F) {
	f.Add("", uint8(0), []byte{})
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAA", uint8(0), []byte{0})
	f.Add("AQAAAAEAAAABAAAAAAAAAAE=", uint8(1), []byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add("AQAAAAIAAAACAAAAAAAAAAI=", uint8(2), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20})
	f.Add("not a receipt", uint8(3), []byte{1})
	f.Add("AgAAAAMAAAAAAAAAxVkNR+xc2gE=", uint8(4), []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08"))
	f.Fuzz(func(t *testing.T, text string, which uint8, flip []byte) {
		ctx := context.Background()
		clk := clock.NewMock()
		q := azq.New(azq.WithClock(clk))
		put := func(content string, opts *azq.PutOptions) azq.Message {
			m, err := q.Put(ctx, content, opts)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		// lapsed and dequeued are taken by the first Get; after their
		// leases lapse, only lapsed is taken again.
		lapsed := put("lapsed", nil)
		dequeued := put("dequeued", nil)
		updated := put("updated", nil)
		fresh := put("fresh", &azq.PutOptions{VisibilityTimeout: time.Hour})
		expired := put("expired", &azq.PutOptions{VisibilityTimeout: 30 * time.Second, TimeToLive: time.Minute})

		ids := []azq.MessageID{fresh.ID, dequeued.ID, lapsed.ID, updated.ID, expired.ID}
		current := map[azq.MessageID]azq.PopReceipt{fresh.ID: fresh.PopReceipt}
		old := []azq.PopReceipt{lapsed.PopReceipt, dequeued.PopReceipt, updated.PopReceipt}
		got, err := q.Get(ctx, 32, 10*time.Second)
		if err != nil || len(got) != 3 || got[0].ID != lapsed.ID || got[1].ID != dequeued.ID || got[2].ID != updated.ID {
			t.Fatalf("Get: %d messages, %v; want lapsed, dequeued, updated", len(got), err)
		}
		for _, m := range got {
			current[m.ID] = m.PopReceipt
		}
		clk.Add(10 * time.Second) // the leases lapse
		again, err := q.Get(ctx, 1, time.Hour)
		if err != nil || len(again) != 1 || again[0].ID != lapsed.ID {
			t.Fatalf("second Get: %d messages, %v; want lapsed", len(again), err)
		}
		old = append(old, current[lapsed.ID])
		current[lapsed.ID] = again[0].PopReceipt
		res, err := q.Update(ctx, updated.ID, current[updated.ID], time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, current[updated.ID])
		current[updated.ID] = res.PopReceipt
		clk.Add(time.Minute) // "expired" expires
		old = append(old, expired.PopReceipt)

		try := func(id azq.MessageID, text string) {
			r, err := azq.ParsePopReceipt(text)
			if err != nil {
				checkAzqErr(t, "ParsePopReceipt", err, azq.ErrInvalidPopReceipt, azq.CodeInvalidQueryParameterValue)
				return
			}
			cur, live := current[id]
			err = q.Delete(ctx, id, r)
			switch {
			case err == nil && (!live || r != cur):
				t.Fatalf("Delete(%v, %q) deleted with a receipt that is not the message's current one", id, text)
			case err == nil:
				delete(current, id)
			case live && r == cur:
				t.Fatalf("Delete(%v) refused the current receipt: %v", id, err)
			default:
				checkAzqErr(t, "Delete", err, azq.ErrMessageNotFound, azq.CodeMessageNotFound)
			}
		}

		for _, id := range ids {
			try(id, text)
		}
		// A variant of one message's current receipt, or of a superseded
		// one, with the fuzzer's bits flipped in its text.
		var base azq.PopReceipt
		target := ids[int(which)%len(ids)]
		if r, ok := current[target]; ok && which < 128 {
			base = r
		} else {
			base = old[int(which)%len(old)]
		}
		b := []byte(base.String())
		for i, x := range flip {
			b[i%len(b)] ^= x
		}
		for _, id := range ids {
			try(id, string(b))
		}
		for _, r := range old {
			for _, id := range ids {
				try(id, r.String())
			}
		}

		n, err := q.ApproximateCount(ctx)
		if err != nil || n != len(current) {
			t.Fatalf("ApproximateCount = %d, %v; want %d", n, err, len(current))
		}
		for id, r := range current {
			if err := q.Delete(ctx, id, r); err != nil {
				t.Fatalf("Delete(%v) with its current receipt: %v", id, err)
			}
		}
		if n, _ := q.ApproximateCount(ctx); n != 0 {
			t.Fatalf("ApproximateCount = %d after deleting everything", n)
		}
	})
}
