package azq

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

const day = 24 * time.Hour

var ctx = context.Background()

// newMockQueue returns a queue on a mock clock set to a fixed instant.
func newMockQueue(t *testing.T, opts ...Option) (*Queue, *clock.Mock) {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	return New(append([]Option{WithClock(clk)}, opts...)...), clk
}

// snapshot describes every stored message and the queue's own state, for
// checking that a refused operation changed nothing.
func snapshot(q *Queue) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var rows []string
	for slot := uint32(0); slot < q.store.next; slot++ {
		n := q.store.at(slot)
		if n.seq == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("%d %s %q ins=%d exp=%d vis=%d deq=%d ver=%d tag=%x",
			n.seq, n.id, n.content, n.inserted, n.expires, n.visible, n.dequeues, n.version, n.tag))
	}
	sort.Strings(rows)
	return fmt.Sprintf("count=%d seq=%d md=%v acl=%v\n%s", q.count, q.seq, q.metadata, q.policies, strings.Join(rows, "\n"))
}

// wantError checks that err is an *Error of the given sentinel kind with the
// given code and HTTP status.
func wantError(t *testing.T, err error, kind *Error, code ErrorCode, status int) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *azq.Error %s", err, err, code)
	}
	if !errors.Is(err, kind) {
		t.Errorf("errors.Is(%v, %s) = false", err, kind.Code)
	}
	if e.Code != code || e.StatusCode != status {
		t.Errorf("error = %s/%d, want %s/%d", e.Code, e.StatusCode, code, status)
	}
	return e
}

func mustPut(t *testing.T, q *Queue, content string, o *PutOptions) Message {
	t.Helper()
	m, err := q.Put(ctx, content, o)
	if err != nil {
		t.Fatalf("Put(%q): %v", content, err)
	}
	return m
}

func mustGet(t *testing.T, q *Queue, n int, vis time.Duration) []Message {
	t.Helper()
	ms, err := q.Get(ctx, n, vis)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return ms
}

// TestBadInputChangesNothing drives every argument rule of spec §0 with a
// bad value and checks the exact Azure code, the details, and that the
// queue is unchanged.
func TestBadInputChangesNothing(t *testing.T) {
	tooBig := strings.Repeat("x", 65537)
	cases := []struct {
		name    string
		op      func(q *Queue, m Message) error
		kind    *Error
		code    ErrorCode
		status  int
		details map[string]string
	}{
		{"put content over 64 KiB", func(q *Queue, _ Message) error { _, err := q.Put(ctx, tooBig, nil); return err },
			ErrMessageTooLarge, CodeRequestBodyTooLarge, 413, map[string]string{"MaxLimit": "65536"}},
		{"put visibility negative", func(q *Queue, _ Message) error {
			_, err := q.Put(ctx, "x", &PutOptions{VisibilityTimeout: -time.Second})
			return err
		}, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400,
			map[string]string{"QueryParameterName": "visibilitytimeout", "QueryParameterValue": "-1", "MinimumAllowed": "0", "MaximumAllowed": "604800"}},
		{"put visibility over 7 days", func(q *Queue, _ Message) error {
			_, err := q.Put(ctx, "x", &PutOptions{VisibilityTimeout: 7*day + time.Second, TimeToLive: NeverExpires})
			return err
		}, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterValue": "604801"}},
		{"put visibility equal to default TTL", func(q *Queue, _ Message) error {
			_, err := q.Put(ctx, "x", &PutOptions{VisibilityTimeout: 7 * day})
			return err
		}, ErrInvalidArgument, CodeInvalidQueryParameterValue, 400, map[string]string{"QueryParameterName": "visibilitytimeout"}},
		{"put visibility equal to TTL", func(q *Queue, _ Message) error {
			_, err := q.Put(ctx, "x", &PutOptions{VisibilityTimeout: time.Minute, TimeToLive: time.Minute})
			return err
		}, ErrInvalidArgument, CodeInvalidQueryParameterValue, 400, nil},
		{"put TTL below -1", func(q *Queue, _ Message) error {
			_, err := q.Put(ctx, "x", &PutOptions{TimeToLive: -2 * time.Second})
			return err
		}, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterName": "messagettl", "MinimumAllowed": "-1"}},
		{"get 0 messages", func(q *Queue, _ Message) error { _, err := q.Get(ctx, 0, time.Minute); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400,
			map[string]string{"QueryParameterName": "numofmessages", "QueryParameterValue": "0", "MinimumAllowed": "1", "MaximumAllowed": "32"}},
		{"get 33 messages", func(q *Queue, _ Message) error { _, err := q.Get(ctx, 33, time.Minute); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterValue": "33"}},
		{"get -1 messages", func(q *Queue, _ Message) error { _, err := q.Get(ctx, -1, time.Minute); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterValue": "-1"}},
		{"get visibility 0", func(q *Queue, _ Message) error { _, err := q.Get(ctx, 1, 0); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400,
			map[string]string{"QueryParameterName": "visibilitytimeout", "MinimumAllowed": "1", "MaximumAllowed": "604800"}},
		{"get visibility under 1 s", func(q *Queue, _ Message) error { _, err := q.Get(ctx, 1, 999*time.Millisecond); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterValue": "0.999"}},
		{"get visibility over 7 days", func(q *Queue, _ Message) error { _, err := q.Get(ctx, 1, 7*day+time.Second); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, nil},
		{"receive 33 messages", func(q *Queue, _ Message) error { _, err := q.Receive(ctx, 33, time.Minute); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, nil},
		{"peek 0 messages", func(q *Queue, _ Message) error { _, err := q.Peek(ctx, 0); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"QueryParameterName": "numofmessages"}},
		{"peek 33 messages", func(q *Queue, _ Message) error { _, err := q.Peek(ctx, 33); return err },
			ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, nil},
		{"update visibility negative", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, m.ID, m.PopReceipt, -time.Second, nil)
			return err
		}, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, map[string]string{"MinimumAllowed": "0"}},
		{"update visibility over 7 days", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, m.ID, m.PopReceipt, 7*day+time.Second, nil)
			return err
		}, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400, nil},
		{"update content over 64 KiB", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, m.ID, m.PopReceipt, 0, &tooBig)
			return err
		}, ErrMessageTooLarge, CodeRequestBodyTooLarge, 413, map[string]string{"MaxLimit": "65536"}},
		{"update stale receipt", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, m.ID, staleReceipt(m), 0, nil)
			return err
		}, ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"update zero receipt", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, m.ID, PopReceipt{}, 0, nil)
			return err
		}, ErrInvalidPopReceipt, "MissingRequiredQueryParameter", 400, map[string]string{"QueryParameterName": "popreceipt"}},
		{"update unknown id", func(q *Queue, m Message) error {
			_, err := q.Update(ctx, MessageID{1}, m.PopReceipt, 0, nil)
			return err
		}, ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"delete stale receipt", func(q *Queue, m Message) error { return q.Delete(ctx, m.ID, staleReceipt(m)) },
			ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"delete forged receipt", func(q *Queue, m Message) error {
			r := m.PopReceipt
			r.tag ^= 1 // one bit of the random tag
			return q.Delete(ctx, m.ID, r)
		}, ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"delete receipt of another slot", func(q *Queue, m Message) error {
			return q.Delete(ctx, m.ID, newReceipt(1<<30, m.PopReceipt.version, m.PopReceipt.tag))
		}, ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"delete zero receipt", func(q *Queue, m Message) error { return q.Delete(ctx, m.ID, PopReceipt{}) },
			ErrInvalidPopReceipt, "MissingRequiredQueryParameter", 400, nil},
		{"delete with the wrong id", func(q *Queue, m Message) error { return q.Delete(ctx, MessageID{2}, m.PopReceipt) },
			ErrMessageNotFound, CodeMessageNotFound, 404, nil},
		{"set metadata invalid name", func(q *Queue, _ Message) error { return q.SetMetadata(ctx, map[string]string{"1abc": "v"}) },
			ErrInvalidMetadata, CodeInvalidMetadata, 400, nil},
		{"set metadata empty name", func(q *Queue, _ Message) error { return q.SetMetadata(ctx, map[string]string{"": "v"}) },
			ErrInvalidMetadata, CodeEmptyMetadataKey, 400, nil},
		{"set metadata names equal ignoring case", func(q *Queue, _ Message) error {
			return q.SetMetadata(ctx, map[string]string{"Team": "a", "team": "b"})
		}, ErrInvalidMetadata, CodeInvalidMetadata, 400, nil},
		{"set metadata over 8 KiB", func(q *Queue, _ Message) error {
			return q.SetMetadata(ctx, map[string]string{"big": strings.Repeat("v", 8190)})
		}, ErrInvalidMetadata, CodeMetadataTooLarge, 400, nil},
		{"set 6 access policies", func(q *Queue, _ Message) error {
			ps := make([]AccessPolicy, 6)
			for i := range ps {
				ps[i].ID = fmt.Sprint("p", i)
			}
			return q.SetAccessPolicies(ctx, ps)
		}, ErrInvalidAccessPolicy, CodeInvalidXMLDocument, 400, nil},
		{"access policy with a bad permission", func(q *Queue, _ Message) error {
			return q.SetAccessPolicies(ctx, []AccessPolicy{{ID: "p", Permission: "rw"}})
		}, ErrInvalidAccessPolicy, CodeInvalidXMLDocument, 400, nil},
		{"access policy ID over 64 characters", func(q *Queue, _ Message) error {
			return q.SetAccessPolicies(ctx, []AccessPolicy{{ID: strings.Repeat("i", 65)}})
		}, ErrInvalidAccessPolicy, CodeInvalidXMLDocument, 400, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := newMockQueue(t)
			mustPut(t, q, "visible", nil)
			mustPut(t, q, "delayed", &PutOptions{VisibilityTimeout: time.Hour})
			m := mustGet(t, q, 1, time.Minute)[0]
			if err := q.SetMetadata(ctx, map[string]string{"Owner": "x"}); err != nil {
				t.Fatal(err)
			}
			before := snapshot(q)
			e := wantError(t, tc.op(q, m), tc.kind, tc.code, tc.status)
			for name, want := range tc.details {
				if got, ok := e.Detail(name); !ok || got != want {
					t.Errorf("detail %s = %q (present %v), want %q", name, got, ok, want)
				}
			}
			if after := snapshot(q); after != before {
				t.Errorf("queue changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// staleReceipt returns a receipt of m's slot and tag at an older version,
// what a consumer holds after someone else dequeued or updated m.
func staleReceipt(m Message) PopReceipt {
	return newReceipt(m.PopReceipt.slotNo, m.PopReceipt.version-1, m.PopReceipt.tag)
}

// TestReceiptLifetime checks when a pop receipt dies (spec §0, §7.2): on a
// new Get, on Update, on Delete and on expiry, but not when the visibility
// timeout merely lapses; a Put receipt lives until the first Get.
func TestReceiptLifetime(t *testing.T) {
	t.Run("put receipt deletes before any get", func(t *testing.T) {
		q, _ := newMockQueue(t)
		m := mustPut(t, q, "a", nil)
		if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("put receipt updates a delayed message", func(t *testing.T) {
		q, _ := newMockQueue(t)
		m := mustPut(t, q, "a", &PutOptions{VisibilityTimeout: time.Hour})
		res, err := q.Update(ctx, m.ID, m.PopReceipt, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, q, 1, time.Minute); len(got) != 1 || got[0].Content != "a" {
			t.Fatalf("Get after Update to visibility 0 = %v", got)
		}
		if _, err := q.Update(ctx, m.ID, res.PopReceipt, 0, nil); !errors.Is(err, ErrMessageNotFound) {
			t.Fatalf("Update receipt after Get: err = %v, want MessageNotFound", err)
		}
	})
	t.Run("put receipt dies at first get", func(t *testing.T) {
		q, _ := newMockQueue(t)
		m := mustPut(t, q, "a", nil)
		mustGet(t, q, 1, time.Minute)
		wantError(t, q.Delete(ctx, m.ID, m.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
	})
	t.Run("lapsed lease keeps the receipt", func(t *testing.T) {
		q, clk := newMockQueue(t)
		mustPut(t, q, "a", nil)
		g := mustGet(t, q, 1, 30*time.Second)[0]
		clk.Add(40 * time.Second) // 10 s after the lease ran out, nobody dequeued
		res, err := q.Update(ctx, g.ID, g.PopReceipt, time.Minute, nil)
		if err != nil {
			t.Fatalf("Update after lapse: %v", err)
		}
		clk.Add(2 * time.Minute)
		if err := q.Delete(ctx, g.ID, res.PopReceipt); err != nil {
			t.Fatalf("Delete after lapse: %v", err)
		}
	})
	t.Run("second get kills the first receipt", func(t *testing.T) {
		q, clk := newMockQueue(t)
		mustPut(t, q, "a", nil)
		first := mustGet(t, q, 1, 30*time.Second)[0]
		clk.Add(30 * time.Second)
		second := mustGet(t, q, 1, 30*time.Second)[0]
		if second.ID != first.ID || second.DequeueCount != 2 {
			t.Fatalf("second Get = %+v", second)
		}
		wantError(t, q.Delete(ctx, first.ID, first.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
		if _, err := q.Update(ctx, first.ID, first.PopReceipt, 0, nil); !errors.Is(err, ErrMessageNotFound) {
			t.Fatalf("Update with first receipt: %v", err)
		}
		if err := q.Delete(ctx, second.ID, second.PopReceipt); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("update kills the receipt it used", func(t *testing.T) {
		q, _ := newMockQueue(t)
		mustPut(t, q, "a", nil)
		g := mustGet(t, q, 1, time.Minute)[0]
		res, err := q.Update(ctx, g.ID, g.PopReceipt, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.PopReceipt == g.PopReceipt {
			t.Fatal("Update returned the same receipt")
		}
		wantError(t, q.Delete(ctx, g.ID, g.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
		if err := q.Delete(ctx, g.ID, res.PopReceipt); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("delete kills the receipt", func(t *testing.T) {
		q, _ := newMockQueue(t)
		mustPut(t, q, "a", nil)
		g := mustGet(t, q, 1, time.Minute)[0]
		if err := q.Delete(ctx, g.ID, g.PopReceipt); err != nil {
			t.Fatal(err)
		}
		// Not idempotent, like Azure: a retry after a lost response is 404.
		wantError(t, q.Delete(ctx, g.ID, g.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
	})
	t.Run("expiry kills the receipt, visible or not", func(t *testing.T) {
		q, clk := newMockQueue(t)
		mustPut(t, q, "a", &PutOptions{TimeToLive: time.Minute})
		g := mustGet(t, q, 1, time.Hour)[0] // hidden past its expiry
		clk.Add(time.Minute)
		wantError(t, q.Delete(ctx, g.ID, g.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
		if _, err := q.Update(ctx, g.ID, g.PopReceipt, 0, nil); !errors.Is(err, ErrMessageNotFound) {
			t.Fatalf("Update after expiry: %v", err)
		}
	})
	t.Run("slot reuse does not revive a receipt", func(t *testing.T) {
		q, _ := newMockQueue(t)
		old := mustPut(t, q, "a", nil)
		if err := q.Delete(ctx, old.ID, old.PopReceipt); err != nil {
			t.Fatal(err)
		}
		mustPut(t, q, "b", nil) // takes the freed slot
		wantError(t, q.Delete(ctx, old.ID, old.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
		if n, _ := q.ApproximateCount(ctx); n != 1 {
			t.Fatalf("count = %d, want 1", n)
		}
	})
}

func TestReceiptFormat(t *testing.T) {
	q, _ := newMockQueue(t)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		m := mustPut(t, q, "a", nil)
		s := m.PopReceipt.String()
		if len(s) != 24 || !strings.HasSuffix(s, "=") {
			t.Fatalf("receipt %q: want 24 characters of padded base64", s)
		}
		if seen[s] {
			t.Fatalf("receipt %q issued twice", s)
		}
		seen[s] = true
		r, err := ParsePopReceipt(s)
		if err != nil || r != m.PopReceipt {
			t.Fatalf("ParsePopReceipt(%q) = %v, %v; want the receipt back", s, r, err)
		}
		id, err := ParseMessageID(m.ID.String())
		if err != nil || id != m.ID {
			t.Fatalf("ParseMessageID(%q) = %v, %v", m.ID, id, err)
		}
	}
	for _, bad := range []string{"", "garbage", "AQAAAAAAAAAAaP6BvKddYFA", "AQAAAAAAAAAAaP6BvKddYFA=X",
		"AgAAAAAAAAAAaP6BvKddYFA=", "AQAAAAAAAAAAaP6BvK ddYFA", "AQAAAAAAAAAAaP6BvK+ddYF="} {
		_, err := ParsePopReceipt(bad)
		e := wantError(t, err, ErrInvalidPopReceipt, CodeInvalidQueryParameterValue, 400)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: not ErrInvalidArgument", bad)
		}
		if r, _ := e.Detail("Reason"); r != "Invalid pop receipt format" {
			t.Errorf("%q: Reason = %q", bad, r)
		}
	}
	if _, err := ParseMessageID("not-a-uuid"); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("ParseMessageID(garbage) = %v, want MessageNotFound", err)
	}
}

// TestPopReceiptAppendText: AppendText appends what String returns, for
// azq's own receipts, remote ones and the zero receipt, and an own receipt
// appends into room without allocating.
func TestPopReceiptAppendText(t *testing.T) {
	q, _ := newMockQueue(t)
	own := mustPut(t, q, "a", nil).PopReceipt
	for _, r := range []PopReceipt{own, RemotePopReceipt("AgAAAAMAAAAAAAAAxVkNR+xc2gE="), {}} {
		b, err := r.AppendText([]byte("x="))
		if err != nil || string(b) != "x="+r.String() {
			t.Errorf("AppendText of %q = %q, %v; want %q", r.String(), b, err, "x="+r.String())
		}
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf, _ = own.AppendText(buf[:0]) }); n != 0 {
		t.Errorf("AppendText into room allocates %v times", n)
	}
}

// TestVisibilityRules checks Put, Get and Update visibility and the
// resulting next-visible times.
func TestVisibilityRules(t *testing.T) {
	q, clk := newMockQueue(t)
	t0 := clk.Now()
	delayed := mustPut(t, q, "delayed", &PutOptions{VisibilityTimeout: time.Hour})
	if !delayed.NextVisibleTime.Equal(t0.Add(time.Hour)) || delayed.DequeueCount != 0 {
		t.Fatalf("Put = %+v", delayed)
	}
	// The longest visibility allowed with the default TTL, and with a
	// message that never expires.
	mustPut(t, q, "edge", &PutOptions{VisibilityTimeout: 7*day - time.Second})
	mustPut(t, q, "forever", &PutOptions{VisibilityTimeout: 7 * day, TimeToLive: NeverExpires})
	if ms := mustGet(t, q, 32, time.Minute); len(ms) != 0 {
		t.Fatalf("Get before any is visible = %v", ms)
	}
	if ps, _ := q.Peek(ctx, 32); len(ps) != 0 {
		t.Fatalf("Peek before any is visible = %v", ps)
	}
	clk.Add(time.Hour - time.Nanosecond)
	if ms := mustGet(t, q, 1, time.Minute); len(ms) != 0 {
		t.Fatal("message visible a nanosecond early")
	}
	clk.Add(time.Nanosecond)
	g := mustGet(t, q, 32, 7*day)
	if len(g) != 1 || g[0].Content != "delayed" || g[0].DequeueCount != 1 || !g[0].NextVisibleTime.Equal(clk.Now().Add(7*day)) {
		t.Fatalf("Get at the visible instant = %+v", g)
	}
	// Update with visibility 0 makes it visible at once and keeps the
	// dequeue count; Peek does not count.
	res, err := q.Update(ctx, g[0].ID, g[0].PopReceipt, 0, nil)
	if err != nil || !res.NextVisibleTime.Equal(clk.Now()) {
		t.Fatalf("Update(0) = %+v, %v", res, err)
	}
	p, _ := q.Peek(ctx, 32)
	if len(p) != 1 || p[0].DequeueCount != 1 || !p[0].PopReceipt.IsZero() {
		t.Fatalf("Peek = %+v", p)
	}
	g2 := mustGet(t, q, 32, time.Second)
	if len(g2) != 1 || g2[0].DequeueCount != 2 {
		t.Fatalf("Get after Update = %+v", g2)
	}
}

// TestUpdateContent checks that Update replaces content only when asked,
// and keeps insertion and expiration times.
func TestUpdateContent(t *testing.T) {
	q, clk := newMockQueue(t)
	put := mustPut(t, q, "step 1", &PutOptions{TimeToLive: time.Hour})
	g := mustGet(t, q, 1, time.Minute)[0]
	clk.Add(time.Second)
	res, err := q.Update(ctx, g.ID, g.PopReceipt, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := q.Peek(ctx, 1); p[0].Content != "step 1" {
		t.Fatalf("nil content changed the message: %q", p[0].Content)
	}
	progress := "step 2"
	if _, err := q.Update(ctx, g.ID, res.PopReceipt, 0, &progress); err != nil {
		t.Fatal(err)
	}
	progress = "changed by the caller afterwards"
	p, _ := q.Peek(ctx, 1)
	if p[0].Content != "step 2" || !p[0].InsertionTime.Equal(put.InsertionTime) || !p[0].ExpirationTime.Equal(put.ExpirationTime) {
		t.Fatalf("after Update: %+v (put %+v)", p[0], put)
	}
	empty := ""
	g2 := mustGet(t, q, 1, time.Minute)[0]
	if _, err := q.Update(ctx, g2.ID, g2.PopReceipt, 0, &empty); err != nil {
		t.Fatal(err)
	}
	if p, _ := q.Peek(ctx, 1); p[0].Content != "" {
		t.Fatalf("empty content not stored: %q", p[0].Content)
	}
}

// TestTimeToLive checks the default TTL, explicit TTLs, NeverExpires, and
// that expiry beats visibility (spec §0, §7.5).
func TestTimeToLive(t *testing.T) {
	q, clk := newMockQueue(t)
	t0 := clk.Now()
	def := mustPut(t, q, "default", nil)
	short := mustPut(t, q, "short", &PutOptions{TimeToLive: time.Minute})
	never := mustPut(t, q, "never", &PutOptions{TimeToLive: NeverExpires})
	if !def.ExpirationTime.Equal(t0.Add(7 * day)) {
		t.Errorf("default expiration = %v", def.ExpirationTime)
	}
	if !short.ExpirationTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("short expiration = %v", short.ExpirationTime)
	}
	if want := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC); !never.ExpirationTime.Equal(want) {
		t.Errorf("never expiration = %v, want %v", never.ExpirationTime, want)
	}
	// Update may push visibility past expiry; expiry wins.
	g := mustGet(t, q, 32, time.Second)
	for _, m := range g {
		if m.Content == "short" {
			if _, err := q.Update(ctx, m.ID, m.PopReceipt, 7*day, nil); err != nil {
				t.Fatalf("Update past expiry: %v", err)
			}
		}
	}
	clk.Add(time.Minute - time.Nanosecond)
	if n, _ := q.ApproximateCount(ctx); n != 3 {
		t.Fatalf("count before expiry = %d, want 3", n)
	}
	clk.Add(time.Nanosecond)
	if n, _ := q.ApproximateCount(ctx); n != 2 {
		t.Fatalf("count at expiry = %d, want 2", n)
	}
	clk.Add(7 * day)
	ms := mustGet(t, q, 32, time.Second)
	if len(ms) != 1 || ms[0].Content != "never" {
		t.Fatalf("after 7 days: %+v", ms)
	}
	if n, _ := q.ApproximateCount(ctx); n != 1 {
		t.Fatalf("count after 7 days = %d, want 1", n)
	}
}

// TestTimeToLiveLimits checks the TTL cap that versions before 2017-07-29
// had, through Limits.
func TestTimeToLiveLimits(t *testing.T) {
	q, _ := newMockQueue(t, WithLimits(Limits{MaxTimeToLive: 7 * day}))
	if _, err := q.Put(ctx, "x", &PutOptions{TimeToLive: 7 * day}); err != nil {
		t.Fatal(err)
	}
	_, err := q.Put(ctx, "x", &PutOptions{TimeToLive: 7*day + time.Second})
	e := wantError(t, err, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400)
	if v, _ := e.Detail("MaximumAllowed"); v != "604800" {
		t.Errorf("MaximumAllowed = %q", v)
	}
	_, err = q.Put(ctx, "x", &PutOptions{TimeToLive: NeverExpires})
	wantError(t, err, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400)
}

// TestCustomLimits checks that every limit can be changed, for
// simulations.
func TestCustomLimits(t *testing.T) {
	q, clk := newMockQueue(t, WithLimits(Limits{
		MaxMessageSize: 4, MaxMessagesPerGet: 100, MaxVisibilityTimeout: time.Hour,
		MinGetVisibilityTimeout: time.Millisecond, DefaultTimeToLive: 2 * time.Hour,
	}))
	if _, err := q.Put(ctx, "12345", nil); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("5 bytes with a 4-byte limit: %v", err)
	}
	for i := 0; i < 100; i++ {
		mustPut(t, q, "1234", nil)
	}
	if _, err := q.Put(ctx, "x", &PutOptions{VisibilityTimeout: time.Hour + 1}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("visibility over the custom cap: %v", err)
	}
	ms := mustGet(t, q, 100, time.Millisecond)
	if len(ms) != 100 || !ms[0].ExpirationTime.Equal(ms[0].InsertionTime.Add(2*time.Hour)) {
		t.Fatalf("Get(100) = %d messages, expiration %v", len(ms), ms[0].ExpirationTime)
	}
	clk.Add(time.Millisecond)
	if ms := mustGet(t, q, 100, time.Millisecond); len(ms) != 100 {
		t.Fatalf("after a 1 ms lease: %d messages", len(ms))
	}
	if got := q.Limits(); got.MaxMessageSize != 4 || got.MaxTimeToLive != 0 {
		t.Fatalf("Limits() = %+v", got)
	}
}

// TestMessageSize checks the 64 KiB boundary, counted in bytes.
func TestMessageSize(t *testing.T) {
	q, _ := newMockQueue(t)
	ok := strings.Repeat("é", 65536/2) // 65,536 bytes of UTF-8
	if _, err := q.Put(ctx, ok, nil); err != nil {
		t.Fatalf("65,536 bytes: %v", err)
	}
	if _, err := q.Put(ctx, ok+"x", nil); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("65,537 bytes: %v", err)
	}
	if _, err := q.Put(ctx, "", nil); err != nil {
		t.Fatalf("empty message: %v", err)
	}
}

// TestOrder checks Get's order: next-visible time, then insertion; and that
// a message whose lease lapsed comes back behind messages visible earlier.
func TestOrder(t *testing.T) {
	q, clk := newMockQueue(t)
	mustPut(t, q, "c", &PutOptions{VisibilityTimeout: 3 * time.Second})
	mustPut(t, q, "a", nil)
	mustPut(t, q, "b", nil)
	mustPut(t, q, "d", &PutOptions{VisibilityTimeout: 3 * time.Second})
	first := mustGet(t, q, 1, time.Second)[0] // "a", back at +1 s
	if first.Content != "a" {
		t.Fatalf("first = %q", first.Content)
	}
	clk.Add(5 * time.Second)
	var got []string
	for _, m := range mustGet(t, q, 32, time.Minute) {
		got = append(got, m.Content)
	}
	if want := []string{"b", "a", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

// TestPeek checks that Peek returns only visible, unexpired messages in
// order and changes nothing.
func TestPeek(t *testing.T) {
	q, clk := newMockQueue(t)
	for i := 0; i < 40; i++ {
		vis := time.Duration(0)
		if i%3 == 0 {
			vis = time.Minute
		}
		mustPut(t, q, fmt.Sprint(i), &PutOptions{VisibilityTimeout: vis, TimeToLive: time.Duration(i+1) * time.Hour})
	}
	before := snapshot(q)
	p, err := q.Peek(ctx, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 26 {
		t.Fatalf("Peek = %d messages, want the 26 visible ones", len(p))
	}
	if after := snapshot(q); after != before {
		t.Fatal("Peek changed the queue")
	}
	clk.Add(time.Minute)
	// Order is next-visible time, then insertion: the messages visible at
	// once, then the delayed ones.
	var want []string
	for _, delayed := range []bool{false, true} {
		for i := 0; i < 40; i++ {
			if (i%3 == 0) == delayed {
				want = append(want, fmt.Sprint(i))
			}
		}
	}
	p, _ = q.Peek(ctx, 32)
	for i, m := range p {
		if m.Content != want[i] {
			t.Fatalf("Peek[%d] = %q, want %q", i, m.Content, want[i])
		}
	}
	clk.Add(10 * time.Hour) // expires 0..9
	p, _ = q.Peek(ctx, 32)
	if len(p) != 30 || p[0].Content != "10" {
		t.Fatalf("after expiry Peek = %d messages starting %q", len(p), p[0].Content)
	}
}

func TestClearAndClose(t *testing.T) {
	q, _ := newMockQueue(t)
	m := mustPut(t, q, "a", nil)
	mustPut(t, q, "b", &PutOptions{VisibilityTimeout: time.Hour})
	if err := q.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Fatalf("count after Clear = %d", n)
	}
	wantError(t, q.Delete(ctx, m.ID, m.PopReceipt), ErrMessageNotFound, CodeMessageNotFound, 404)
	mustPut(t, q, "after clear", nil)
	if ms := mustGet(t, q, 32, time.Second); len(ms) != 1 || ms[0].Content != "after clear" {
		t.Fatalf("after Clear: %+v", ms)
	}
	q.Close()
	q.Close()
	_, err := q.Put(ctx, "x", nil)
	wantError(t, err, ErrQueueNotFound, CodeQueueNotFound, 404)
	_, err = q.Get(ctx, 1, time.Second)
	wantError(t, err, ErrQueueNotFound, CodeQueueNotFound, 404)
}

func TestCanceledContext(t *testing.T) {
	q, _ := newMockQueue(t)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := q.Put(c, "x", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with canceled context: %v", err)
	}
	if n, _ := q.ApproximateCount(ctx); n != 0 {
		t.Fatal("a canceled Put stored a message")
	}
}

func TestQueueNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		code ErrorCode
	}{
		{"abc", ""}, {"a-b-c", ""}, {"123", ""}, {strings.Repeat("a", 63), ""},
		{"ab", CodeOutOfRangeInput}, {strings.Repeat("a", 64), CodeOutOfRangeInput}, {"", CodeOutOfRangeInput},
		{"Abc", CodeInvalidResourceName}, {"-abc", CodeInvalidResourceName}, {"abc-", CodeInvalidResourceName},
		{"a--b", CodeInvalidResourceName}, {"a_b", CodeInvalidResourceName}, {"a|b", CodeInvalidResourceName},
		{"a.b", CodeInvalidResourceName}, {"ab\x00", CodeInvalidResourceName},
	} {
		err := ValidateQueueName(tc.name)
		if tc.code == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.name, err)
			}
			continue
		}
		wantError(t, err, ErrInvalidQueueName, tc.code, 400)
	}
}

func TestService(t *testing.T) {
	clk := clock.NewMock()
	svc := NewService(WithClock(clk))
	md := map[string]string{"Team": "a"}
	q, created, err := svc.CreateQueue(ctx, "orders", md)
	if err != nil || !created {
		t.Fatalf("CreateQueue = %v, %v", created, err)
	}
	md["Team"] = "changed by the caller"
	// Same metadata, names ignoring case: no-op, as Azure's 204.
	q2, created, err := svc.CreateQueue(ctx, "orders", map[string]string{"team": "a"})
	if err != nil || created || q2 != q {
		t.Fatalf("CreateQueue again = %v, %v, %v", q2 == q, created, err)
	}
	_, _, err = svc.CreateQueue(ctx, "orders", map[string]string{"Team": "b"})
	wantError(t, err, ErrQueueAlreadyExists, CodeQueueAlreadyExists, 409)
	_, _, err = svc.CreateQueue(ctx, "Orders", nil)
	wantError(t, err, ErrInvalidQueueName, CodeInvalidResourceName, 400)
	_, _, err = svc.CreateQueue(ctx, "bad-md", map[string]string{"a-b": "x"})
	wantError(t, err, ErrInvalidMetadata, CodeInvalidMetadata, 400)
	if _, err := svc.Queue("bad-md"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatal("a refused CreateQueue created the queue")
	}
	if q.Clock() != clk {
		t.Fatal("a service queue does not use the service's clock")
	}

	p, err := q.Properties(ctx)
	if err != nil || p.Metadata["Team"] != "a" {
		t.Fatalf("Properties = %+v, %v", p, err)
	}
	p.Metadata["Team"] = "mutated copy"
	if md, _ := q.Metadata(ctx); md["Team"] != "a" {
		t.Fatal("mutating returned metadata changed the queue")
	}

	for _, name := range []string{"alpha", "beta", "orders-poison", "zeta", "ordersx"} {
		if _, _, err := svc.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	marker := ""
	for {
		page, err := svc.ListQueues(ctx, ListQueuesOptions{MaxResults: 2, Marker: marker})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Queues {
			all = append(all, it.Name)
		}
		if marker = page.NextMarker; marker == "" {
			break
		}
	}
	if want := []string{"alpha", "beta", "orders", "orders-poison", "ordersx", "zeta"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("ListQueues pages = %v, want %v", all, want)
	}
	page, err := svc.ListQueues(ctx, ListQueuesOptions{Prefix: "orders", IncludeMetadata: true})
	if err != nil || len(page.Queues) != 3 || page.Queues[0].Metadata["Team"] != "a" || page.NextMarker != "" {
		t.Fatalf("ListQueues(prefix orders) = %+v, %v", page, err)
	}
	_, err = svc.ListQueues(ctx, ListQueuesOptions{MaxResults: 5001})
	wantError(t, err, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400)
	_, err = svc.ListQueues(ctx, ListQueuesOptions{MaxResults: -1})
	wantError(t, err, ErrOutOfRange, CodeOutOfRangeQueryParameterValue, 400)
	_, err = svc.ListQueues(ctx, ListQueuesOptions{Marker: "not a marker"})
	wantError(t, err, ErrInvalidMarker, CodeInvalidMarker, 400)

	// A deleted queue's handle answers QueueNotFound; the name is free.
	m := mustPut(t, q, "x", nil)
	if err := svc.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	wantError(t, q.Delete(ctx, m.ID, m.PopReceipt), ErrQueueNotFound, CodeQueueNotFound, 404)
	wantError(t, svc.DeleteQueue(ctx, "orders"), ErrQueueNotFound, CodeQueueNotFound, 404)
	if _, err := svc.Queue("orders"); !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("Queue after delete: %v", err)
	}
	if _, created, err := svc.CreateQueue(ctx, "orders", nil); err != nil || !created {
		t.Fatalf("re-create: %v, %v", created, err)
	}
	svc.Close()
	_, _, err = svc.CreateQueue(ctx, "after-close", nil)
	wantError(t, err, ErrQueueNotFound, CodeQueueNotFound, 404)
}

func TestAccessPolicies(t *testing.T) {
	q, clk := newMockQueue(t)
	ps := []AccessPolicy{{ID: "readers", Start: clk.Now(), Expiry: clk.Now().Add(day), Permission: "r"}, {ID: "all", Permission: "raup"}}
	if err := q.SetAccessPolicies(ctx, ps); err != nil {
		t.Fatal(err)
	}
	ps[0].Permission = "mutated"
	got, err := q.AccessPolicies(ctx)
	if err != nil || len(got) != 2 || got[0].Permission != "r" {
		t.Fatalf("AccessPolicies = %+v, %v", got, err)
	}
	p, ok, err := q.AccessPolicy(ctx, "all")
	if err != nil || !ok || p.Permission != "raup" {
		t.Fatalf("AccessPolicy(all) = %+v, %v, %v", p, ok, err)
	}
	if _, ok, _ := q.AccessPolicy(ctx, "none"); ok {
		t.Fatal("found a policy that was never set")
	}
	if err := q.SetAccessPolicies(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.AccessPolicies(ctx); len(got) != 0 {
		t.Fatalf("after clearing: %+v", got)
	}
}

// TestReceiveMockClock checks that Receive waits without polling and
// returns at exactly the mock instant its message becomes visible, and
// that Put and Update wake it.
func TestReceiveMockClock(t *testing.T) {
	q, clk := newMockQueue(t)
	mustPut(t, q, "later", &PutOptions{VisibilityTimeout: time.Hour})
	type result struct {
		ms  []Message
		at  time.Time
		err error
	}
	receive := func() chan result {
		ch := make(chan result, 1)
		go func() {
			ms, err := q.Receive(ctx, 1, time.Minute)
			ch <- result{ms, clk.Now(), err}
		}()
		return ch
	}
	ch := receive()
	waitForWaiters(t, q, 1)
	want := clk.Now().Add(time.Hour)
	clk.Add(30 * time.Minute)
	select {
	case r := <-ch:
		t.Fatalf("Receive returned early: %+v", r)
	default:
	}
	clk.Add(30 * time.Minute)
	r := <-ch
	if r.err != nil || len(r.ms) != 1 || r.ms[0].Content != "later" || !r.at.Equal(want) {
		t.Fatalf("Receive = %+v, want 'later' at %v", r, want)
	}

	// Put wakes a waiter on an empty queue.
	ch = receive()
	waitForWaiters(t, q, 1)
	mustPut(t, q, "now", nil)
	if r := <-ch; r.err != nil || r.ms[0].Content != "now" {
		t.Fatalf("Receive after Put = %+v", r)
	}

	// Context cancellation ends the wait.
	c, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := q.Receive(c, 1, time.Minute); errc <- err }()
	waitForWaiters(t, q, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Receive after cancel: %v", err)
	}

	// Close wakes waiters with QueueNotFound.
	go func() { _, err := q.Receive(ctx, 1, time.Minute); errc <- err }()
	waitForWaiters(t, q, 1)
	q.Close()
	if err := <-errc; !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("Receive after Close: %v", err)
	}
}

// waitForWaiters blocks until n Receive calls are waiting on q. It yields
// to the scheduler rather than sleeping: the waiters are runnable
// goroutines that need only CPU time to get there.
func waitForWaiters(t *testing.T, q *Queue, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q.mu.Lock()
		w := q.waiters
		q.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters after 10 s, want %d", w, n)
		}
		runtime_Gosched()
	}
}

// TestRingFallback checks the visibility index when a mock clock is set
// back: messages put visible go to the tree, and order still holds.
func TestRingFallback(t *testing.T) {
	q, clk := newMockQueue(t)
	t0 := clk.Now()
	mustPut(t, q, "late", nil)
	clk.Set(t0.Add(-time.Minute))
	mustPut(t, q, "early", nil)
	clk.Set(t0)
	var got []string
	for _, m := range mustGet(t, q, 32, time.Second) {
		got = append(got, m.Content)
	}
	if want := []string{"early", "late"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
}

// TestRingCompaction deletes and updates many ring messages behind one that
// is never taken, which must not let dead ring entries pile up.
func TestRingCompaction(t *testing.T) {
	q, _ := newMockQueue(t)
	mustPut(t, q, "head", nil)
	for i := 0; i < 10000; i++ {
		m := mustPut(t, q, "x", nil)
		if i%2 == 0 {
			if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				t.Fatal(err)
			}
		} else if _, err := q.Update(ctx, m.ID, m.PopReceipt, time.Hour, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.vis.entries(); n > 3000 {
		t.Fatalf("rings hold %d entries for 1 live message", n)
	}
	if p, _ := q.Peek(ctx, 32); len(p) != 1 || p[0].Content != "head" {
		t.Fatalf("Peek = %+v", p)
	}
}

// TestExpiryCompaction deletes many messages with a TTL, which must not let
// stale expiry entries pile up.
func TestExpiryCompaction(t *testing.T) {
	q, _ := newMockQueue(t)
	for i := 0; i < 10000; i++ {
		m := mustPut(t, q, "x", nil)
		if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(q.expiry.items); n > 2100 {
		t.Fatalf("expiry heap holds %d entries for 0 messages", n)
	}
}

func runtime_Gosched() { runtime.Gosched() }

// checkIndexes verifies the queue's internal bookkeeping: every stored
// message is in exactly one place of the visibility index (a live ring
// entry or a btree item with its key), the counters of dead ring entries
// and stale expiry entries are exact, and every message with a TTL has a
// live expiry entry.
func checkIndexes(q *Queue) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	where := map[uint64]int{}
	v := &q.vis
	for ri := range v.rings {
		r := &v.rings[ri]
		dead := 0
		for i := 0; i < r.n; i++ {
			e := r.at(i)
			if !q.vis.live(e) {
				dead++
				continue
			}
			where[e.seq]++
			if n := q.store.at(e.slot); ringOf(n) != ri {
				return fmt.Errorf("message %d is in ring %d, belongs in ring %d", n.seq, ri, ringOf(n))
			}
			if i > 0 {
				if p := r.at(i - 1); q.vis.live(p) && !q.store.at(p.slot).before(visItem{at: q.store.at(e.slot).visible, seq: e.seq}) {
					return fmt.Errorf("ring %d out of order at entry %d", ri, i)
				}
			}
		}
		if dead != r.dead {
			return fmt.Errorf("ring %d: %d dead entries, counter says %d", ri, dead, r.dead)
		}
	}
	var err error
	v.tree.Scan(func(it visItem) bool {
		if it == visSentinel {
			return true
		}
		n := q.store.lookup(it.slot)
		if n == nil || n.seq != it.seq || n.visible != it.at {
			err = fmt.Errorf("btree item %+v names no stored message", it)
			return false
		}
		where[it.seq]++
		return true
	})
	if err != nil {
		return err
	}
	stale, withTTL := 0, map[uint64]bool{}
	for _, e := range q.expiry.items {
		if q.expiryLive(e) {
			withTTL[q.store.at(e.slot).seq] = true
		} else {
			stale++
		}
	}
	if stale != q.expiry.stale {
		return fmt.Errorf("expiry heap: %d stale entries, counter says %d", stale, q.expiry.stale)
	}
	live := 0
	for slot := uint32(0); slot < q.store.next; slot++ {
		n := q.store.at(slot)
		if n.seq == 0 {
			continue
		}
		live++
		if where[n.seq] != 1 {
			return fmt.Errorf("message %d is %d times in the visibility index", n.seq, where[n.seq])
		}
		if n.expires != neverExpires && !withTTL[n.seq] {
			return fmt.Errorf("message %d has no expiry entry", n.seq)
		}
	}
	if live != q.count {
		return fmt.Errorf("%d stored messages, count says %d", live, q.count)
	}
	return nil
}

// TestCompactionKeepsCountsExact removes messages through every path that
// leaves dead entries (Delete, Update and expiry of ring messages, Delete of
// hidden ones) in numbers that trigger compaction many times, and checks the
// bookkeeping after each round.
func TestCompactionKeepsCountsExact(t *testing.T) {
	q, clk := newMockQueue(t)
	mustPut(t, q, "head", &PutOptions{TimeToLive: NeverExpires})
	for round := 0; round < 6; round++ {
		for i := 0; i < 3000; i++ {
			m := mustPut(t, q, "x", &PutOptions{TimeToLive: time.Duration(1+i%3) * time.Minute})
			switch i % 4 {
			case 0:
				if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
					t.Fatal(err)
				}
			case 1:
				if _, err := q.Update(ctx, m.ID, m.PopReceipt, time.Second, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := checkIndexes(q); err != nil {
			t.Fatalf("round %d before expiry: %v", round, err)
		}
		clk.Add(2 * time.Minute) // expires two thirds of what is left
		if _, err := q.Peek(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := checkIndexes(q); err != nil {
			t.Fatalf("round %d after expiry: %v", round, err)
		}
	}
	if q.vis.entries() > 4*q.count+2048 || len(q.expiry.items) > 4*q.count+2048 {
		t.Fatalf("indexes hold %d ring and %d expiry entries for %d messages", q.vis.entries(), len(q.expiry.items), q.count)
	}
}

// TestGetSliceFitsWhatItFound: the slice a Get or Peek returns is made for
// the messages it found, not for the n asked for nor for the invisible
// messages queued, so a Get(32) that finds one message costs one Message.
func TestGetSliceFitsWhatItFound(t *testing.T) {
	q, _ := newMockQueue(t)
	for i := 0; i < 100; i++ {
		mustPut(t, q, "m", nil)
	}
	for taken := 0; taken < 99; {
		ms, err := q.Get(ctx, min(32, 99-taken), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		taken += len(ms)
	}
	ms, err := q.Peek(ctx, 32)
	if err != nil || len(ms) != 1 || cap(ms) != 1 {
		t.Fatalf("Peek(32) with one visible message among 100: len %d cap %d, %v; want 1 and 1", len(ms), cap(ms), err)
	}
	ms, err = q.Get(ctx, 32, time.Minute)
	if err != nil || len(ms) != 1 || cap(ms) != 1 {
		t.Fatalf("Get(32) with one visible message among 100: len %d cap %d, %v; want 1 and 1", len(ms), cap(ms), err)
	}
}

// TestAppendGet: AppendGet takes what Get would, appended after what dst
// holds, and leaves dst as it was when it finds nothing or fails.
func TestAppendGet(t *testing.T) {
	kept := Message{Content: "kept"}
	for _, tc := range []struct {
		name     string
		puts     int
		dst      []Message
		n        int
		vis      time.Duration
		closed   bool
		wantTook int
		wantErr  *Error
	}{
		{name: "into nil", puts: 3, n: 2, vis: time.Minute, wantTook: 2},
		{name: "after what dst holds", puts: 3, dst: []Message{kept}, n: 32, vis: time.Minute, wantTook: 3},
		{name: "into room to spare", puts: 1, dst: make([]Message, 0, 32), n: 32, vis: time.Minute, wantTook: 1},
		{name: "nothing visible", dst: []Message{kept}, n: 32, vis: time.Minute},
		{name: "nothing visible into nil", n: 1, vis: time.Minute},
		{name: "bad count", puts: 1, dst: []Message{kept}, n: 33, vis: time.Minute, wantErr: ErrOutOfRange},
		{name: "bad visibility", puts: 1, dst: []Message{kept}, n: 1, vis: 0, wantErr: ErrOutOfRange},
		{name: "closed queue", puts: 1, dst: []Message{kept}, n: 1, vis: time.Minute, closed: true, wantErr: ErrQueueNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, clk := newMockQueue(t)
			for i := 0; i < tc.puts; i++ {
				mustPut(t, q, fmt.Sprint("m", i), nil)
			}
			if tc.closed {
				q.Close()
			}
			before := snapshot(q)
			var dst []Message // a copy of tc.dst, room and all
			if tc.dst != nil {
				dst = append(make([]Message, 0, cap(tc.dst)), tc.dst...)
			}
			got, err := q.AppendGet(ctx, dst, tc.n, tc.vis)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if after := snapshot(q); after != before {
					t.Fatalf("a refused AppendGet changed the queue:\n%s\nwant\n%s", after, before)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.dst)+tc.wantTook {
				t.Fatalf("len = %d, want %d already there + %d taken", len(got), len(tc.dst), tc.wantTook)
			}
			if (got == nil) != (tc.dst == nil && tc.wantTook == 0) {
				t.Fatalf("got nil = %v with dst nil = %v and %d taken", got == nil, tc.dst == nil, tc.wantTook)
			}
			if !slices.Equal(got[:len(tc.dst)], tc.dst) {
				t.Fatalf("the messages dst held were changed: %+v", got[:len(tc.dst)])
			}
			if len(got) > 0 && cap(dst) >= len(got) && &got[0] != &dst[:1][0] {
				t.Fatal("AppendGet allocated although dst had room")
			}
			for i, m := range got[len(tc.dst):] {
				if want := fmt.Sprint("m", i); m.Content != want || m.DequeueCount != 1 ||
					!m.NextVisibleTime.Equal(clk.Now().Add(tc.vis)) {
					t.Fatalf("message %d = %+v, want %q dequeued once, visible again in %v", i, m, want, tc.vis)
				}
				if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
					t.Fatalf("message %d's receipt: %v", i, err)
				}
			}
		})
	}
}

// TestAppendGetReusesTheBuffer: a consumer that hands AppendGet the same
// buffer each time allocates nothing for the messages it takes.
func TestAppendGetReusesTheBuffer(t *testing.T) {
	q, _ := newMockQueue(t)
	buf := make([]Message, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 4; i++ {
			if _, err := q.Put(ctx, "m", nil); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if buf, err = q.AppendGet(ctx, buf[:0], 4, time.Minute); err != nil || len(buf) != 4 {
			t.Fatalf("AppendGet: %d messages, %v", len(buf), err)
		}
		for _, m := range buf {
			if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("a cycle of 4 messages through a reused buffer allocates %v times, want 0", allocs)
	}
}
