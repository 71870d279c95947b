package queuetest

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azqlib/azq"
)

// The batch checks run through azq.PutBatch and azq.DeleteBatch, which
// call the back end's own batch (azq.BatchPutter, azq.BatchDeleter) when
// it has one and fall back to one call an item otherwise, so they hold
// every back end to the batch contract: a batch answers per item what
// the single calls answer. They compare a batch on the subtest's queue
// with the single calls on a twin, a second queue of the fixture that
// has been through the same calls.

// batchSentinels are the sentinels whose match the batch checks compare
// between an item's error and the single call's.
var batchSentinels = []error{
	azq.ErrMessageNotFound, azq.ErrQueueNotFound, azq.ErrMessageTooLarge,
	azq.ErrOutOfRange, azq.ErrInvalidArgument, azq.ErrInvalidPopReceipt,
	context.Canceled, context.DeadlineExceeded,
}

// sameError reports how an item's error differs from what the single call
// answered, or "" if it does not: nil for nil, the same sentinels and,
// for an *azq.Error, the same code, status, details and message, where
// the message IDs of the two queues' messages (ids, batch's then twin's)
// and a remote service's request ID do not count.
func sameError(got, want error, ids ...azq.MessageID) string {
	if got == nil || want == nil {
		if got == nil && want == nil {
			return ""
		}
		return "got " + errString(got) + ", the single call answered " + errString(want)
	}
	for _, s := range batchSentinels {
		if errors.Is(got, s) != errors.Is(want, s) {
			return "got " + got.Error() + ", the single call answered " + want.Error() + ": they differ in matching " + s.Error()
		}
	}
	var ge, we *azq.Error
	if errors.As(got, &ge) != errors.As(want, &we) {
		return "got " + got.Error() + ", the single call answered " + want.Error() + ": only one is an *azq.Error"
	}
	if ge == nil {
		return ""
	}
	if ge.Code != we.Code || ge.StatusCode != we.StatusCode || !reflect.DeepEqual(ge.Details, we.Details) ||
		normalMessage(ge.Message, ids) != normalMessage(we.Message, ids) {
		return "got " + describeError(ge) + ", the single call answered " + describeError(we)
	}
	return ""
}

// normalMessage is an error message without the message IDs it names
// and without the request ID a remote service's answer carries.
func normalMessage(m string, ids []azq.MessageID) string {
	for _, id := range ids {
		if !id.IsZero() {
			m = strings.ReplaceAll(m, id.String(), "<id>")
		}
	}
	if i := strings.Index(m, " (request "); i >= 0 {
		m = m[:i]
	}
	return m
}

func describeError(e *azq.Error) string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	b.WriteString(" ")
	b.WriteString(e.Error())
	for _, d := range e.Details {
		b.WriteString(" " + d.Name + "=" + d.Value)
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// putBatch is azq.PutBatch, which must answer one result per request.
func (s *suite) putBatch(reqs []azq.PutRequest) []azq.PutResult {
	s.t.Helper()
	res, err := azq.PutBatch(s.ctx, s.q, reqs)
	if err != nil {
		s.t.Fatalf("PutBatch of %d: %v", len(reqs), err)
	}
	if len(res) != len(reqs) {
		s.t.Fatalf("PutBatch of %d answered %d results", len(reqs), len(res))
	}
	return res
}

// deleteBatch is azq.DeleteBatch, which must answer one error per request.
func (s *suite) deleteBatch(reqs []azq.DeleteRequest) []error {
	s.t.Helper()
	errs, err := azq.DeleteBatch(s.ctx, s.q, reqs)
	if err != nil {
		s.t.Fatalf("DeleteBatch of %d: %v", len(reqs), err)
	}
	if len(errs) != len(reqs) {
		s.t.Fatalf("DeleteBatch of %d answered %d errors", len(reqs), len(errs))
	}
	return errs
}

// twinSuite returns a suite on a twin of the subtest's queue: another
// fresh queue of the fixture.
func (s *suite) twinSuite() *suite {
	s.t.Helper()
	if s.twin == nil {
		s.t.Fatal("the suite has no way to make a twin queue")
	}
	f := s.twin()
	if f.Queue == nil {
		s.t.Fatal("the fixture has no queue")
	}
	return &suite{t: s.t, q: f.Queue, mock: f.Clock, ctx: s.ctx}
}

// badPuts are requests that Put refuses, each for its own reason.
func badPuts() []azq.PutRequest {
	return []azq.PutRequest{
		{Content: strings.Repeat("x", maxContent+1)},
		{Content: "x", Options: &azq.PutOptions{VisibilityTimeout: -time.Second}},
		{Content: "x", Options: &azq.PutOptions{VisibilityTimeout: week + time.Second}},
		{Content: "x", Options: &azq.PutOptions{VisibilityTimeout: time.Minute, TimeToLive: time.Minute}},
		{Content: "x", Options: &azq.PutOptions{VisibilityTimeout: week}},
		{Content: "x", Options: &azq.PutOptions{TimeToLive: -2 * time.Second}},
	}
}

func testBatchPutMatchesPut(s *suite) {
	twin := s.twinSuite()
	reqs := []azq.PutRequest{
		{Content: "a"},
		{Content: ""},
		{Content: "later", Options: &azq.PutOptions{VisibilityTimeout: 3 * time.Second}},
		{Content: "short-lived", Options: &azq.PutOptions{TimeToLive: time.Hour}},
		{Content: "forever", Options: &azq.PutOptions{TimeToLive: azq.NeverExpires, VisibilityTimeout: time.Minute}},
		{Content: strings.Repeat("b", maxContent)},
	}
	// The refused requests sit between the others, so that a batch that
	// lets one item's failure touch its neighbours shows.
	bad := badPuts()
	mixed := make([]azq.PutRequest, 0, len(reqs)+len(bad))
	for i := range max(len(reqs), len(bad)) {
		if i < len(reqs) {
			mixed = append(mixed, reqs[i])
		}
		if i < len(bad) {
			mixed = append(mixed, bad[i])
		}
	}
	res := s.putBatch(mixed)
	var put []azq.Message
	seen := map[azq.MessageID]bool{}
	for i, r := range mixed {
		single, err := twin.q.Put(twin.ctx, r.Content, r.Options)
		if d := sameError(res[i].Err, err, res[i].Message.ID, single.ID); d != "" {
			s.t.Fatalf("item %d (%.20q): %s", i, r.Content, d)
		}
		if err != nil {
			continue
		}
		m := res[i].Message
		if m.ID.IsZero() || m.PopReceipt.IsZero() || seen[m.ID] {
			s.t.Fatalf("item %d: a message without an ID or receipt of its own: %+v", i, m)
		}
		seen[m.ID] = true
		if m.Content != r.Content || m.DequeueCount != 0 {
			s.t.Fatalf("item %d: content %.20q, DequeueCount %d; want %.20q, 0", i, m.Content, m.DequeueCount, r.Content)
		}
		if s.exact() {
			s.sameTime(m.InsertionTime, s.now(), "item's InsertionTime")
		}
		s.span(m.InsertionTime, m.NextVisibleTime, single.NextVisibleTime.Sub(single.InsertionTime), "item's NextVisibleTime")
		if single.ExpirationTime.Equal(farFuture) {
			if !m.ExpirationTime.Equal(farFuture) {
				s.t.Fatalf("item %d: ExpirationTime %v, want %v", i, m.ExpirationTime, farFuture)
			}
		} else {
			s.span(m.InsertionTime, m.ExpirationTime, single.ExpirationTime.Sub(single.InsertionTime), "item's ExpirationTime")
		}
		put = append(put, m)
	}
	s.count(len(reqs))
	// What is visible, and what a Get answers, are the single calls'.
	s.visible(put[0].ID, put[1].ID, put[3].ID, put[5].ID)
	got := s.getN(4, time.Minute)
	for _, g := range got {
		if g.DequeueCount != 1 {
			s.t.Fatalf("Get of a batch's message: DequeueCount %d", g.DequeueCount)
		}
	}
	// The delayed messages' Put receipts work until their first Get; the
	// others' Get receipts.
	var dels []azq.DeleteRequest
	for _, g := range got {
		dels = append(dels, azq.DeleteRequest{ID: g.ID, PopReceipt: g.PopReceipt})
	}
	dels = append(dels, azq.DeleteRequest{ID: put[2].ID, PopReceipt: put[2].PopReceipt},
		azq.DeleteRequest{ID: put[4].ID, PopReceipt: put[4].PopReceipt})
	for i, err := range s.deleteBatch(dels) {
		if err != nil {
			s.t.Fatalf("DeleteBatch item %d: %v", i, err)
		}
	}
	s.count(0)
}

func testBatchDeleteMatchesDelete(s *suite) {
	twin := s.twinSuite()
	// The same story on both queues: four messages got, one updated, one
	// deleted.
	type story struct{ put, got []azq.Message }
	var stories [2]story
	var updated [2]azq.UpdateResult
	for k, q := range []*suite{s, twin} {
		var st story
		for _, c := range []string{"a", "b", "c", "d"} {
			st.put = append(st.put, q.put(c, nil))
		}
		got := q.getN(4, time.Minute)
		byID := map[azq.MessageID]azq.Message{}
		for _, g := range got {
			byID[g.ID] = g
		}
		for _, p := range st.put {
			st.got = append(st.got, byID[p.ID])
		}
		updated[k] = q.update(st.got[2].ID, st.got[2].PopReceipt, time.Minute, nil)
		q.delete(st.got[3].ID, st.got[3].PopReceipt)
		stories[k] = st
	}
	reqsOf := func(k int) []azq.DeleteRequest {
		st := stories[k]
		return []azq.DeleteRequest{
			{ID: st.got[0].ID, PopReceipt: st.got[0].PopReceipt}, // current: deleted
			{ID: st.put[1].ID, PopReceipt: st.put[1].PopReceipt}, // Put's, stale since the Get
			{ID: st.got[2].ID, PopReceipt: st.got[2].PopReceipt}, // stale since the Update
			{ID: st.got[3].ID, PopReceipt: st.got[3].PopReceipt}, // deleted already
			{ID: unknownID, PopReceipt: st.got[1].PopReceipt},    // no such message
			{ID: st.got[1].ID}, // no receipt
			{ID: st.got[0].ID, PopReceipt: st.got[0].PopReceipt},  // deleted by the first item
			{ID: st.got[2].ID, PopReceipt: updated[k].PopReceipt}, // current: deleted
			{ID: st.got[2].ID, PopReceipt: updated[k].PopReceipt}, // deleted by the item before
		}
	}
	errs := s.deleteBatch(reqsOf(0))
	for i, r := range reqsOf(1) {
		err := twin.q.Delete(twin.ctx, r.ID, r.PopReceipt)
		if d := sameError(errs[i], err, reqsOf(0)[i].ID, r.ID); d != "" {
			s.t.Fatalf("item %d: %s", i, d)
		}
	}
	for _, i := range []int{0, 7} {
		if errs[i] != nil {
			s.t.Fatalf("item %d, with the current receipt: %v", i, errs[i])
		}
	}
	for _, i := range []int{1, 2, 3, 4, 6, 8} {
		s.wantErr(errs[i], azq.ErrMessageNotFound, "", 0, "DeleteBatch item "+strconv.Itoa(i))
	}
	// Only b is left, and its receipt still works: the stale items failed
	// alone.
	s.count(1)
	b := stories[0].got[1]
	s.delete(b.ID, b.PopReceipt)
	s.count(0)
}

func testBatchLimits(s *suite) {
	// MaxBatchSize items are a batch; one more is refused whole.
	reqs := make([]azq.PutRequest, azq.MaxBatchSize+1)
	for i := range reqs {
		reqs[i].Content = "m"
	}
	_, err := azq.PutBatch(s.ctx, s.q, reqs)
	s.wantErr(err, azq.ErrOutOfRange, "", 0, "PutBatch of MaxBatchSize+1 items")
	s.count(0)
	res := s.putBatch(reqs[:azq.MaxBatchSize])
	dels := make([]azq.DeleteRequest, 0, azq.MaxBatchSize+1)
	for i, r := range res {
		if r.Err != nil {
			s.t.Fatalf("PutBatch of MaxBatchSize items, item %d: %v", i, r.Err)
		}
		dels = append(dels, azq.DeleteRequest{ID: r.Message.ID, PopReceipt: r.Message.PopReceipt})
	}
	s.count(azq.MaxBatchSize)
	dels = append(dels, dels[0])
	_, err = azq.DeleteBatch(s.ctx, s.q, dels)
	s.wantErr(err, azq.ErrOutOfRange, "", 0, "DeleteBatch of MaxBatchSize+1 items")
	s.count(azq.MaxBatchSize)
	for i, err := range s.deleteBatch(dels[:azq.MaxBatchSize]) {
		if err != nil {
			s.t.Fatalf("DeleteBatch of MaxBatchSize items, item %d: %v", i, err)
		}
	}
	s.count(0)

	// An empty batch is no error and changes nothing; neither is a batch
	// of refused items.
	if res := s.putBatch(nil); len(res) != 0 {
		s.t.Fatalf("PutBatch of none answered %d results", len(res))
	}
	if errs := s.deleteBatch(nil); len(errs) != 0 {
		s.t.Fatalf("DeleteBatch of none answered %d errors", len(errs))
	}
	for i, r := range s.putBatch(badPuts()) {
		if r.Err == nil {
			s.t.Fatalf("PutBatch of bad input, item %d: put %+v", i, r.Message)
		}
	}
	s.count(0)
}

// A batch under an ended context fails, and puts or deletes nothing.
func testBatchEndedContext(s *suite) {
	m := s.put("m", nil)
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	res, err := azq.PutBatch(ctx, s.q, []azq.PutRequest{{Content: "a"}, {Content: "b"}})
	wholeFailure(s.t, batchPutter(s.q), err, len(res), 2, func(i int) error { return res[i].Err }, context.Canceled, "PutBatch under an ended context")
	errs, err := azq.DeleteBatch(ctx, s.q, []azq.DeleteRequest{{ID: m.ID, PopReceipt: m.PopReceipt}})
	wholeFailure(s.t, batchDeleter(s.q), err, len(errs), 1, func(i int) error { return errs[i] }, context.Canceled, "DeleteBatch under an ended context")
	s.visible(m.ID)
	s.delete(m.ID, m.PopReceipt)
}

// wholeFailure checks a batch call that must fail as a whole with
// sentinel: with the call's error and no results if the back end has a
// batch of its own for it (batched), else with each item's error, as the
// helpers answer without one. n is the number of results, item(i) the
// error of the i'th and want the number of requests.
func wholeFailure(t *testing.T, batched bool, err error, n, want int, item func(int) error, sentinel error, what string) {
	t.Helper()
	if batched {
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: %v, want an error matching %v", what, err, sentinel)
		}
		if n != 0 {
			t.Fatalf("%s: failed with %d results, want none", what, n)
		}
		return
	}
	if err != nil {
		if errors.Is(err, sentinel) {
			return
		}
		t.Fatalf("%s: %v, want an error matching %v", what, err, sentinel)
	}
	if n != want {
		t.Fatalf("%s: %d results of %d items", what, n, want)
	}
	for i := range n {
		if e := item(i); !errors.Is(e, sentinel) {
			t.Fatalf("%s: item %d: %v, want an error matching %v", what, i, e, sentinel)
		}
	}
}

// batchPutter and batchDeleter report whether q has a batch of its own.
func batchPutter(q azq.MessageQueue) bool  { _, ok := q.(azq.BatchPutter); return ok }
func batchDeleter(q azq.MessageQueue) bool { _, ok := q.(azq.BatchDeleter); return ok }

// A batch on a queue that was deleted fails with ErrQueueNotFound, and a
// batch on the queue of the same name created again finds none of the
// old messages.
func testBatchOnADeletedQueue(s *serviceSuite) {
	r := s.create("gone", nil)
	m, err := r.Put(s.ctx, "m", nil)
	if err != nil {
		s.t.Fatalf("Put: %v", err)
	}
	if err := s.svc.DeleteQueue(s.ctx, r.Name()); err != nil {
		s.t.Fatalf("DeleteQueue: %v", err)
	}
	res, err := azq.PutBatch(s.ctx, r, []azq.PutRequest{{Content: "a"}, {Content: "b"}})
	wholeFailure(s.t, batchPutter(r), err, len(res), 2, func(i int) error { return res[i].Err }, azq.ErrQueueNotFound, "PutBatch on a deleted queue")
	errs, err := azq.DeleteBatch(s.ctx, r, []azq.DeleteRequest{{ID: m.ID, PopReceipt: m.PopReceipt}})
	wholeFailure(s.t, batchDeleter(r), err, len(errs), 1, func(i int) error { return errs[i] }, azq.ErrQueueNotFound, "DeleteBatch on a deleted queue")
	s.createAgain(r, nil)
	errs, err = azq.DeleteBatch(s.ctx, r, []azq.DeleteRequest{{ID: m.ID, PopReceipt: m.PopReceipt}})
	if err != nil || len(errs) != 1 {
		s.t.Fatalf("DeleteBatch on the queue created again: %v, %d errors", err, len(errs))
	}
	s.wantErr(errs[0], azq.ErrMessageNotFound, "MessageNotFound", 404, "DeleteBatch of a message of the deleted queue")
	if n, err := r.ApproximateCount(s.ctx); err != nil || n != 0 {
		s.t.Fatalf("ApproximateCount of the queue created again: %d, %v; want 0", n, err)
	}
}
