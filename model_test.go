package azq_test

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"
)

// TestModel drives a Queue with random sequences of every message
// operation, and of mock-clock advances of up to more than seven days, and
// checks each result against a plain reference model of Azure's semantics
// (spec §0 and §7): a list of messages with their content, insertion order,
// next-visible time, expiration time, dequeue count and current receipt.
//
// After every step it checks that the queue holds exactly the model's live
// messages (exact count, and every visible one via Peek, in order); every
// Get, Receive and Peek result is compared field by field, so an invisible,
// deleted or expired message that is returned, a stale or forged receipt
// that deletes or updates, a DequeueCount that is not the number of Gets, or
// an order other than (next-visible time, insertion) fails the test.
//
// Run it harder with: go test -race -run TestModel -rapid.checks=2000 .
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newQueueModel(t)
		t.Repeat(rapid.StateMachineActions(m))
	})
}

// farFuture is the expiration time Azure reports for a message that never
// expires.
var farFuture = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)

const week = 7 * 24 * time.Hour

// modelLimits are the configurations the model runs under: Azure's limits
// (the zero Limits), and small custom ones that make the size, count and
// time-to-live caps easy to reach. want is what Queue.Limits must report.
var modelLimits = []struct {
	name      string
	give, eff azq.Limits
}{
	{"azure", azq.Limits{}, azq.Limits{
		MaxMessageSize:          65536,
		MaxMessagesPerGet:       32,
		MaxVisibilityTimeout:    week,
		MinGetVisibilityTimeout: time.Second,
		DefaultTimeToLive:       week,
		MaxTimeToLive:           0,
	}},
	{"custom", azq.Limits{
		MaxMessageSize:          16,
		MaxMessagesPerGet:       4,
		MaxVisibilityTimeout:    time.Hour,
		MinGetVisibilityTimeout: time.Millisecond,
		DefaultTimeToLive:       2 * time.Hour,
		MaxTimeToLive:           3 * time.Hour,
	}, azq.Limits{
		MaxMessageSize:          16,
		MaxMessagesPerGet:       4,
		MaxVisibilityTimeout:    time.Hour,
		MinGetVisibilityTimeout: time.Millisecond,
		DefaultTimeToLive:       2 * time.Hour,
		MaxTimeToLive:           3 * time.Hour,
	}},
}

// modelMsg is the model's view of one stored message.
type modelMsg struct {
	id        azq.MessageID
	content   string
	seq       int // insertion order
	inserted  time.Time
	visibleAt time.Time
	expiresAt time.Time // unused when never
	never     bool
	dequeues  int64
	receipt   azq.PopReceipt // the current one
}

func (m *modelMsg) expired(now time.Time) bool {
	return !m.never && !now.Before(m.expiresAt)
}

func (m *modelMsg) visible(now time.Time) bool {
	return !m.visibleAt.After(now) && !m.expired(now)
}

func (m *modelMsg) expiration() time.Time {
	if m.never {
		return farFuture
	}
	return m.expiresAt
}

// receiptRef is a receipt together with the ID it was issued for.
type receiptRef struct {
	id      azq.MessageID
	receipt azq.PopReceipt
}

type queueModel struct {
	ctx  context.Context
	clk  *clock.Mock
	q    *azq.Queue
	lim  azq.Limits // the effective limits
	live []*modelMsg

	gone     map[azq.MessageID]bool // deleted, cleared or expired
	goneRefs []receiptRef           // their last receipts
	stale    []receiptRef           // superseded receipts of any message
	seq      int
}

const maxRefs = 256

func newQueueModel(t *rapid.T) *queueModel {
	cfg := rapid.SampledFrom(modelLimits).Draw(t, "limits")
	clk := clock.NewMock()
	// Start somewhere other than the Unix epoch, at an odd nanosecond.
	clk.Set(time.Date(2024, 2, 29, 23, 59, 59, 999_999_999, time.UTC))
	q := azq.New(azq.WithClock(clk), azq.WithLimits(cfg.give))
	if got := q.Limits(); got != cfg.eff {
		t.Fatalf("Limits() = %+v, want %+v", got, cfg.eff)
	}
	return &queueModel{
		ctx:  context.Background(),
		clk:  clk,
		q:    q,
		lim:  cfg.eff,
		gone: map[azq.MessageID]bool{},
	}
}

// purge moves the messages that have expired by now out of the live set.
func (s *queueModel) purge() {
	now := s.clk.Now()
	kept := s.live[:0]
	for _, m := range s.live {
		if m.expired(now) {
			s.forget(m)
			continue
		}
		kept = append(kept, m)
	}
	clear(s.live[len(kept):])
	s.live = kept
}

// forget records that m left the queue.
func (s *queueModel) forget(m *modelMsg) {
	s.gone[m.id] = true
	s.goneRefs = appendRef(s.goneRefs, receiptRef{m.id, m.receipt})
}

func appendRef(refs []receiptRef, r receiptRef) []receiptRef {
	if len(refs) == maxRefs {
		copy(refs, refs[1:])
		refs = refs[:maxRefs-1]
	}
	return append(refs, r)
}

// visibleOrder returns the visible messages in the order Get takes them:
// by next-visible time, then insertion.
func (s *queueModel) visibleOrder() []*modelMsg {
	now := s.clk.Now()
	var vis []*modelMsg
	for _, m := range s.live {
		if m.visible(now) {
			vis = append(vis, m)
		}
	}
	sort.SliceStable(vis, func(i, j int) bool {
		a, b := vis[i], vis[j]
		if !a.visibleAt.Equal(b.visibleAt) {
			return a.visibleAt.Before(b.visibleAt)
		}
		return a.seq < b.seq
	})
	return vis
}

func (s *queueModel) find(id azq.MessageID) *modelMsg {
	for _, m := range s.live {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (s *queueModel) remove(m *modelMsg) {
	for i, x := range s.live {
		if x == m {
			s.live = append(s.live[:i], s.live[i+1:]...)
			s.forget(m)
			return
		}
	}
}

// renew gives m a new current receipt, checking that it is fresh.
func (s *queueModel) renew(t *rapid.T, m *modelMsg, r azq.PopReceipt) {
	t.Helper()
	if r.IsZero() {
		t.Fatalf("message %v: zero receipt issued", m.id)
	}
	if r == m.receipt {
		t.Fatalf("message %v: new receipt %v equals the old one", m.id, r)
	}
	checkReceiptText(t, r)
	s.stale = appendRef(s.stale, receiptRef{m.id, m.receipt})
	m.receipt = r
}

func checkReceiptText(t *rapid.T, r azq.PopReceipt) {
	t.Helper()
	p, err := azq.ParsePopReceipt(r.String())
	if err != nil || p != r {
		t.Fatalf("receipt %q does not round-trip: %v, %v", r.String(), p, err)
	}
}

// sameMessage compares a returned message with the model's.
func sameMessage(t *rapid.T, op string, got azq.Message, want *modelMsg, wantReceipt bool) {
	t.Helper()
	var bad []string
	if got.ID != want.id {
		bad = append(bad, "ID "+got.ID.String()+" want "+want.id.String())
	}
	if got.Content != want.content {
		bad = append(bad, "content")
	}
	if !got.InsertionTime.Equal(want.inserted) {
		bad = append(bad, "InsertionTime "+got.InsertionTime.String()+" want "+want.inserted.String())
	}
	if !got.ExpirationTime.Equal(want.expiration()) {
		bad = append(bad, "ExpirationTime "+got.ExpirationTime.String()+" want "+want.expiration().String())
	}
	if !got.NextVisibleTime.Equal(want.visibleAt) {
		bad = append(bad, "NextVisibleTime "+got.NextVisibleTime.String()+" want "+want.visibleAt.String())
	}
	if got.DequeueCount != want.dequeues {
		bad = append(bad, "DequeueCount")
	}
	if !wantReceipt && !got.PopReceipt.IsZero() {
		bad = append(bad, "has a receipt")
	}
	if len(bad) > 0 {
		t.Fatalf("%s: message %v differs from the model: %s (got content %q, want %q)",
			op, want.id, strings.Join(bad, "; "), short(got.Content), short(want.content))
	}
}

// short cuts long content down for failure messages.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// wantErr is one error an operation may legitimately return.
type wantErr struct {
	is   *azq.Error
	code azq.ErrorCode
}

var (
	errOutOfRange   = wantErr{azq.ErrOutOfRange, azq.CodeOutOfRangeQueryParameterValue}
	errTooLarge     = wantErr{azq.ErrMessageTooLarge, azq.CodeRequestBodyTooLarge}
	errNotFound     = wantErr{azq.ErrMessageNotFound, azq.CodeMessageNotFound}
	errVisNotBelow  = wantErr{azq.ErrInvalidArgument, azq.CodeInvalidQueryParameterValue}
	errNoReceipt    = wantErr{azq.ErrInvalidPopReceipt, "MissingRequiredQueryParameter"}
	errBadReceiptTx = wantErr{azq.ErrInvalidPopReceipt, azq.CodeInvalidQueryParameterValue}
)

// expectErr fails unless err is one of wants: an *azq.Error that matches the
// sentinel with errors.Is and carries exactly the code and the sentinel's
// HTTP status. When several checks fail at once, the order in which azq
// reports them is not specified, so any of them is accepted.
func expectErr(t *rapid.T, op string, err error, wants ...wantErr) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", op, wants)
	}
	var e *azq.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T) is not an *azq.Error", op, err, err)
	}
	for _, w := range wants {
		if errors.Is(err, w.is) && e.Code == w.code && e.StatusCode == w.is.StatusCode {
			return
		}
	}
	t.Fatalf("%s: error %v (code %s, status %d), want one of %v", op, err, e.Code, e.StatusCode, wants)
}

func (w wantErr) String() string { return string(w.code) }

// Generators. Each draws a kind first, so that boundaries come up often and
// failures shrink to the simplest kind.

func drawContent(t *rapid.T, lim azq.Limits, label string) string {
	switch k := rapid.IntRange(0, 19).Draw(t, label+"Kind"); {
	case k < 3:
		return ""
	case k < 7:
		return rapid.StringN(0, 12, -1).Draw(t, label)
	case k < 9:
		return string(rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, label+"Bytes"))
	case k < 10:
		return strings.Repeat("a", lim.MaxMessageSize) // exactly the limit
	case k < 11:
		return strings.Repeat("a", lim.MaxMessageSize+1)
	case k < 12:
		// Fewer characters than the limit, but more bytes.
		return strings.Repeat("é", lim.MaxMessageSize/2+1)
	default:
		return "msg-" + rapid.StringMatching(`[a-z0-9]{1,6}`).Draw(t, label)
	}
}

func durationIn(t *rapid.T, lo, hi time.Duration, label string) time.Duration {
	return time.Duration(rapid.Int64Range(int64(lo), int64(hi)).Draw(t, label))
}

// drawVisibility draws a visibility timeout in [lo, max] three times in
// four, and just or far outside it otherwise.
func drawVisibility(t *rapid.T, lo, max time.Duration, label string) time.Duration {
	switch k := rapid.IntRange(0, 19).Draw(t, label+"Kind"); {
	case k < 2:
		return lo
	case k < 3:
		return max
	case k < 6:
		return durationIn(t, lo, max, label) // any nanosecond
	case k < 10:
		return time.Duration(rapid.Int64Range(int64((lo+time.Second-1)/time.Second), int64(max/time.Second)).Draw(t, label)) * time.Second
	case k < 15:
		return durationIn(t, lo, min(max, lo+10*time.Second), label)
	case k < 16:
		return max + 1
	case k < 17:
		return lo - 1
	case k < 18:
		return -durationIn(t, 1, week, label)
	default:
		return durationIn(t, max, 2*max, label)
	}
}

func drawTTL(t *rapid.T, lim azq.Limits, vis time.Duration) time.Duration {
	switch rapid.IntRange(0, 9).Draw(t, "ttlKind") {
	case 0:
		return 0 // the default
	case 1:
		return azq.NeverExpires
	case 2:
		return durationIn(t, 1, time.Hour, "ttl")
	case 3:
		return time.Duration(rapid.Int64Range(1, 10*86400).Draw(t, "ttlSeconds")) * time.Second
	case 4:
		return vis // not shorter than the visibility timeout
	case 5:
		return vis + 1
	case 6:
		return -durationIn(t, 2, week, "ttl") // negative, not NeverExpires
	case 7:
		if lim.MaxTimeToLive > 0 {
			return lim.MaxTimeToLive + time.Duration(rapid.IntRange(0, 1).Draw(t, "overMax"))
		}
		return durationIn(t, week, 400*24*time.Hour, "ttl")
	case 8:
		return 1 // one nanosecond
	default:
		return durationIn(t, 1, 10*time.Second, "ttl")
	}
}

func drawCount(t *rapid.T, lim azq.Limits) int {
	switch rapid.IntRange(0, 4).Draw(t, "nKind") {
	case 0:
		return lim.MaxMessagesPerGet
	case 1:
		return lim.MaxMessagesPerGet + 1
	case 2:
		return rapid.IntRange(-2, 0).Draw(t, "n")
	default:
		return rapid.IntRange(1, lim.MaxMessagesPerGet).Draw(t, "n")
	}
}

// Actions.

func (s *queueModel) Put(t *rapid.T) {
	s.purge()
	content := drawContent(t, s.lim, "content")
	vis := drawVisibility(t, 0, s.lim.MaxVisibilityTimeout, "visibility")
	ttl := drawTTL(t, s.lim, vis)
	var opts *azq.PutOptions
	if vis != 0 || ttl != 0 || rapid.Bool().Draw(t, "withOptions") {
		opts = &azq.PutOptions{VisibilityTimeout: vis, TimeToLive: ttl}
	}
	now := s.clk.Now()
	got, err := s.q.Put(s.ctx, content, opts)

	var wants []wantErr
	if len(content) > s.lim.MaxMessageSize {
		wants = append(wants, errTooLarge)
	}
	eff, ttlOK := ttl, true
	switch {
	case ttl == 0:
		eff = s.lim.DefaultTimeToLive
	case ttl == azq.NeverExpires:
		ttlOK = s.lim.MaxTimeToLive == 0
	case ttl < 0:
		ttlOK = false
	case s.lim.MaxTimeToLive > 0 && ttl > s.lim.MaxTimeToLive:
		ttlOK = false
	}
	if !ttlOK {
		wants = append(wants, errOutOfRange)
	}
	if vis < 0 || vis > s.lim.MaxVisibilityTimeout {
		wants = append(wants, errOutOfRange)
	} else if ttlOK && eff != azq.NeverExpires && vis >= eff {
		wants = append(wants, errVisNotBelow)
	}
	if len(wants) > 0 {
		expectErr(t, "Put", err, wants...)
		return
	}
	if err != nil {
		t.Fatalf("Put(len %d, vis %v, ttl %v): %v", len(content), vis, ttl, err)
	}

	if got.ID.IsZero() || s.gone[got.ID] || s.find(got.ID) != nil {
		t.Fatalf("Put: ID %v is zero or was used before", got.ID)
	}
	if p, err := azq.ParseMessageID(got.ID.String()); err != nil || p != got.ID {
		t.Fatalf("Put: ID %q does not round-trip: %v", got.ID.String(), err)
	}
	s.seq++
	m := &modelMsg{
		id:        got.ID,
		content:   content,
		seq:       s.seq,
		inserted:  now,
		visibleAt: now.Add(vis),
		never:     eff == azq.NeverExpires,
	}
	if !m.never {
		m.expiresAt = now.Add(eff)
	}
	sameMessage(t, "Put", got, m, true)
	if got.PopReceipt.IsZero() {
		t.Fatalf("Put: no receipt")
	}
	checkReceiptText(t, got.PopReceipt)
	m.receipt = got.PopReceipt
	s.live = append(s.live, m)
}

func (s *queueModel) Get(t *rapid.T) {
	s.getOrReceive(t, false)
}

// Receive runs only when it cannot block: either a message is visible, in
// which case it must behave exactly like Get, or its context is already
// cancelled, in which case it must return the context's error and change
// nothing.
func (s *queueModel) Receive(t *rapid.T) {
	s.purge()
	if len(s.visibleOrder()) > 0 {
		s.getOrReceive(t, true)
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	n := rapid.IntRange(1, s.lim.MaxMessagesPerGet).Draw(t, "n")
	msgs, err := s.q.Receive(ctx, n, azq.DefaultVisibilityTimeout)
	if !errors.Is(err, context.Canceled) || len(msgs) != 0 {
		t.Fatalf("Receive with a cancelled context on a queue with nothing visible: %d messages, %v", len(msgs), err)
	}
}

func (s *queueModel) getOrReceive(t *rapid.T, receive bool) {
	s.purge()
	n := drawCount(t, s.lim)
	var vis time.Duration
	if rapid.Bool().Draw(t, "defaultVisibility") {
		vis = azq.DefaultVisibilityTimeout
	} else {
		vis = drawVisibility(t, s.lim.MinGetVisibilityTimeout, s.lim.MaxVisibilityTimeout, "visibility")
	}
	op := "Get"
	now := s.clk.Now()
	var msgs []azq.Message
	var err error
	if receive {
		op = "Receive"
		msgs, err = s.q.Receive(s.ctx, n, vis)
	} else {
		msgs, err = s.q.Get(s.ctx, n, vis)
	}
	if n < 1 || n > s.lim.MaxMessagesPerGet || vis < s.lim.MinGetVisibilityTimeout || vis > s.lim.MaxVisibilityTimeout {
		expectErr(t, op, err, errOutOfRange)
		return
	}
	if err != nil {
		t.Fatalf("%s(%d, %v): %v", op, n, vis, err)
	}
	if msgs == nil {
		t.Fatalf("%s: nil slice, want an empty one", op)
	}
	want := s.visibleOrder()
	want = want[:min(n, len(want))]
	if len(msgs) != len(want) {
		t.Fatalf("%s(%d): %d messages, want %d", op, n, len(msgs), len(want))
	}
	for i, m := range want {
		m.visibleAt = now.Add(vis)
		m.dequeues++
		sameMessage(t, op, msgs[i], m, true)
		s.renew(t, m, msgs[i].PopReceipt)
	}
}

func (s *queueModel) Peek(t *rapid.T) {
	s.purge()
	n := drawCount(t, s.lim)
	msgs, err := s.q.Peek(s.ctx, n)
	if n < 1 || n > s.lim.MaxMessagesPerGet {
		expectErr(t, "Peek", err, errOutOfRange)
		return
	}
	s.comparePeek(t, n, msgs, err)
}

func (s *queueModel) comparePeek(t *rapid.T, n int, msgs []azq.Message, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("Peek(%d): %v", n, err)
	}
	if msgs == nil {
		t.Fatalf("Peek: nil slice, want an empty one")
	}
	want := s.visibleOrder()
	want = want[:min(n, len(want))]
	if len(msgs) != len(want) {
		t.Fatalf("Peek(%d): %d messages, want %d visible", n, len(msgs), len(want))
	}
	for i, m := range want {
		if s.gone[msgs[i].ID] {
			t.Fatalf("Peek: deleted or expired message %v reappeared", msgs[i].ID)
		}
		sameMessage(t, "Peek", msgs[i], m, false)
	}
}

// drawTarget picks the ID and receipt for an Update or Delete: the current
// receipt of a live message, a superseded one, a forged one, another
// message's, a gone message's last one, the zero receipt, or an unknown ID.
// ok is false when the draw was a malformed receipt text, which has been
// checked already and leaves nothing to send.
func (s *queueModel) drawTarget(t *rapid.T) (id azq.MessageID, r azq.PopReceipt, ok bool) {
	kinds := []string{"unknown", "zero"}
	if len(s.live) > 0 {
		kinds = append(kinds, "current", "current", "current", "forged", "other")
	}
	if len(s.stale) > 0 {
		kinds = append(kinds, "stale", "stale")
	}
	if len(s.goneRefs) > 0 {
		kinds = append(kinds, "gone")
	}
	pickLive := func() *modelMsg { return s.live[rapid.IntRange(0, len(s.live)-1).Draw(t, "msg")] }
	switch rapid.SampledFrom(kinds).Draw(t, "target") {
	case "current":
		m := pickLive()
		return m.id, m.receipt, true
	case "forged":
		m := pickLive()
		b, err := base64.StdEncoding.DecodeString(m.receipt.String())
		if err != nil || len(b) == 0 {
			t.Fatalf("receipt text %q is not standard base64: %v", m.receipt.String(), err)
		}
		i := rapid.IntRange(0, len(b)-1).Draw(t, "byte")
		b[i] ^= 1 << rapid.IntRange(0, 7).Draw(t, "bit")
		text := base64.StdEncoding.EncodeToString(b)
		f, err := azq.ParsePopReceipt(text)
		if err != nil {
			// Only the format byte is checked when parsing.
			if i != 0 {
				t.Fatalf("ParsePopReceipt(%q) with byte %d changed: %v", text, i, err)
			}
			expectErr(t, "ParsePopReceipt", err, errBadReceiptTx)
			return id, r, false
		}
		return m.id, f, true
	case "other":
		a, b := pickLive(), pickLive()
		return b.id, a.receipt, true
	case "stale":
		ref := s.stale[rapid.IntRange(0, len(s.stale)-1).Draw(t, "ref")]
		return ref.id, ref.receipt, true
	case "gone":
		ref := s.goneRefs[rapid.IntRange(0, len(s.goneRefs)-1).Draw(t, "ref")]
		return ref.id, ref.receipt, true
	case "zero":
		if len(s.live) > 0 {
			return pickLive().id, azq.PopReceipt{}, true
		}
		return id, r, true
	default:
		copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "id"))
		raw := append([]byte{1}, rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "receipt")...)
		r, err := azq.ParsePopReceipt(base64.StdEncoding.EncodeToString(raw))
		if err != nil {
			t.Fatalf("ParsePopReceipt of a well-formed receipt: %v", err)
		}
		return id, r, true
	}
}

// current reports the live message whose current receipt r is, if it is
// id's.
func (s *queueModel) current(id azq.MessageID, r azq.PopReceipt) *modelMsg {
	m := s.find(id)
	if m == nil || m.receipt != r {
		return nil
	}
	return m
}

func (s *queueModel) Update(t *rapid.T) {
	s.purge()
	id, r, ok := s.drawTarget(t)
	if !ok {
		return
	}
	vis := drawVisibility(t, 0, s.lim.MaxVisibilityTimeout, "visibility")
	var content *string
	if rapid.Bool().Draw(t, "newContent") {
		c := drawContent(t, s.lim, "content")
		content = &c
	}
	now := s.clk.Now()
	res, err := s.q.Update(s.ctx, id, r, vis, content)

	var wants []wantErr
	if vis < 0 || vis > s.lim.MaxVisibilityTimeout {
		wants = append(wants, errOutOfRange)
	}
	if content != nil && len(*content) > s.lim.MaxMessageSize {
		wants = append(wants, errTooLarge)
	}
	if len(wants) == 0 {
		switch m := s.current(id, r); {
		case r.IsZero():
			wants = append(wants, errNoReceipt)
		case m == nil:
			wants = append(wants, errNotFound)
		default:
			if err != nil {
				t.Fatalf("Update with the current receipt: %v", err)
			}
			m.visibleAt = now.Add(vis)
			if content != nil {
				m.content = *content
			}
			if !res.NextVisibleTime.Equal(m.visibleAt) {
				t.Fatalf("Update: NextVisibleTime %v, want %v", res.NextVisibleTime, m.visibleAt)
			}
			s.renew(t, m, res.PopReceipt)
			return
		}
	}
	expectErr(t, "Update", err, wants...)
}

func (s *queueModel) Delete(t *rapid.T) {
	s.purge()
	id, r, ok := s.drawTarget(t)
	if !ok {
		return
	}
	err := s.q.Delete(s.ctx, id, r)
	switch m := s.current(id, r); {
	case r.IsZero():
		expectErr(t, "Delete", err, errNoReceipt)
	case m == nil:
		expectErr(t, "Delete", err, errNotFound)
	default:
		if err != nil {
			t.Fatalf("Delete with the current receipt: %v", err)
		}
		s.remove(m)
		// The receipt died with the message.
		expectErr(t, "Delete again", s.q.Delete(s.ctx, id, r), errNotFound)
	}
}

func (s *queueModel) Clear(t *rapid.T) {
	if err := s.q.Clear(s.ctx); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	for _, m := range s.live {
		s.forget(m)
	}
	s.live = nil
}

// Cancelled runs an operation with valid arguments and a cancelled context:
// it must return the context's error and change nothing.
func (s *queueModel) Cancelled(t *rapid.T) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	var err error
	switch rapid.IntRange(0, 6).Draw(t, "op") {
	case 0:
		_, err = s.q.Put(ctx, "x", nil)
	case 1:
		_, err = s.q.Get(ctx, 1, time.Minute)
	case 2:
		_, err = s.q.Peek(ctx, 1)
	case 3:
		err = s.q.Clear(ctx)
	case 4:
		_, err = s.q.ApproximateCount(ctx)
	default:
		s.purge()
		id, r, ok := s.drawTarget(t)
		if !ok {
			return
		}
		if rapid.Bool().Draw(t, "delete") {
			err = s.q.Delete(ctx, id, r)
		} else {
			_, err = s.q.Update(ctx, id, r, 0, nil)
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("operation with a cancelled context: %v, want context.Canceled", err)
	}
}

// Advance moves the mock clock forward: by small, large and more-than-a-
// week amounts, and exactly to (or one nanosecond short of) the instant a
// message becomes visible or expires.
func (s *queueModel) Advance(t *rapid.T) {
	now := s.clk.Now()
	var events []time.Time
	for _, m := range s.live {
		if m.visibleAt.After(now) {
			events = append(events, m.visibleAt)
		}
		if !m.never && m.expiresAt.After(now) {
			events = append(events, m.expiresAt)
		}
	}
	var d time.Duration
	kind := rapid.IntRange(0, 6).Draw(t, "advanceKind")
	if len(events) == 0 && kind >= 4 {
		kind = 0
	}
	switch kind {
	case 0:
		d = durationIn(t, 0, 2*time.Second, "by")
	case 1:
		d = durationIn(t, 0, 24*time.Hour, "by")
	case 2:
		d = durationIn(t, 0, 8*24*time.Hour, "by")
	case 3:
		d = rapid.SampledFrom([]time.Duration{time.Second, time.Hour, week, week + 1}).Draw(t, "by")
	case 4, 5:
		d = rapid.SampledFrom(events).Draw(t, "to").Sub(now)
	default:
		d = rapid.SampledFrom(events).Draw(t, "toJustBefore").Sub(now) - 1
	}
	s.clk.Add(d)
}

// Check is the invariant, run after every action: the queue holds exactly
// the model's live messages, and shows exactly the visible ones, in order.
func (s *queueModel) Check(t *rapid.T) {
	s.purge()
	n, err := s.q.ApproximateCount(s.ctx)
	if err != nil {
		t.Fatalf("ApproximateCount: %v", err)
	}
	if n != len(s.live) {
		t.Fatalf("ApproximateCount = %d, want %d (exact)", n, len(s.live))
	}
	p, err := s.q.Properties(s.ctx)
	if err != nil || p.ApproximateMessagesCount != len(s.live) {
		t.Fatalf("Properties: count %d, %v; want %d", p.ApproximateMessagesCount, err, len(s.live))
	}
	k := max(1, min(len(s.visibleOrder()), s.lim.MaxMessagesPerGet))
	msgs, err := s.q.Peek(s.ctx, k)
	s.comparePeek(t, k, msgs, err)
}
