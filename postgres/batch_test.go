package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundTrips counts the round trips a pool makes: a statement, or a
// pipeline of statements (one implicit transaction), each one.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// batchEnv is a Service with a mock clock on a schema of the test's own,
// whose pool counts its round trips, and a pool beside it to look at the
// tables.
type batchEnv struct {
	s      *postgres.Service
	mock   *clock.Mock
	trips  *roundTrips
	admin  *pgxpool.Pool
	schema string
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	srv := pgtest.Shared(t)
	schema := srv.NewSchema(t)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC))
	s, err := postgres.New(bg, pool, &postgres.Options{Schema: schema, Clock: mock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	admin, err := pgxpool.New(bg, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	return &batchEnv{s: s, mock: mock, trips: trips, admin: admin, schema: pgx.Identifier{schema}.Sanitize()}
}

// queue creates a queue and puts and deletes one message on it, so that
// the Service's lazy purge has run and issues no statement during the
// test (on the mock clock it is not due again).
func (e *batchEnv) queue(t *testing.T) *postgres.Queue {
	t.Helper()
	q := newQueue(t, e.s)
	m, err := q.Put(bg, "warm-up", nil)
	if err == nil {
		err = q.Delete(bg, m.ID, m.PopReceipt)
	}
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func putRequests(n int, prefix string) []azq.PutRequest {
	reqs := make([]azq.PutRequest, n)
	for i := range reqs {
		reqs[i].Content = fmt.Sprintf("%s-%d", prefix, i)
	}
	return reqs
}

// messageCount is the number of messages of the queue.
func messageCount(t *testing.T, q *postgres.Queue) int {
	t.Helper()
	n, err := q.ApproximateCount(bg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A full batch is one round trip and one transaction each way: its rows
// carry one transaction's id, and the messages come back in the batch's
// order with Put's times, receipts that work, and dequeue counts.
func TestBatchOneTransaction(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t)
	q := e.queue(t)
	reqs := putRequests(azq.MaxBatchSize, "m")
	reqs[3].Options = &azq.PutOptions{TimeToLive: time.Minute}
	reqs[4].Options = &azq.PutOptions{TimeToLive: azq.NeverExpires}
	before := e.trips.n.Load()
	res, err := q.PutBatch(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.trips.n.Load() - before; n != 1 {
		t.Errorf("PutBatch took %d round trips, want 1", n)
	}
	now := e.mock.Now()
	for i, r := range res {
		m := r.Message
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
		wantExpiry := now.Add(7 * 24 * time.Hour)
		switch i {
		case 3:
			wantExpiry = now.Add(time.Minute)
		case 4:
			wantExpiry = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		}
		if m.Content != reqs[i].Content || !m.InsertionTime.Equal(now) || !m.NextVisibleTime.Equal(now) ||
			!m.ExpirationTime.Equal(wantExpiry) || m.DequeueCount != 0 || m.PopReceipt.IsZero() {
			t.Errorf("item %d: %+v", i, m)
		}
	}
	var rows, xacts int
	if err := e.admin.QueryRow(bg, "SELECT count(*), count(DISTINCT xmin::text) FROM "+e.schema+".messages").Scan(&rows, &xacts); err != nil {
		t.Fatal(err)
	}
	if rows != azq.MaxBatchSize || xacts != 1 {
		t.Errorf("%d rows written by %d transactions, want %d by 1", rows, xacts, azq.MaxBatchSize)
	}

	got, err := q.Get(bg, azq.MaxBatchSize, time.Minute)
	if err != nil || len(got) != azq.MaxBatchSize {
		t.Fatalf("Get: %d messages, %v", len(got), err)
	}
	dels := make([]azq.DeleteRequest, len(got))
	for i, m := range got {
		if m.ID != res[i].Message.ID || m.Content != reqs[i].Content || m.DequeueCount != 1 {
			t.Errorf("message %d: %+v, put as %+v", i, m, res[i].Message)
		}
		dels[i] = azq.DeleteRequest{ID: m.ID, PopReceipt: m.PopReceipt}
	}
	before = e.trips.n.Load()
	errs, err := q.DeleteBatch(bg, dels)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.trips.n.Load() - before; n != 1 {
		t.Errorf("DeleteBatch took %d round trips, want 1", n)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("delete %d: %v", i, err)
		}
	}
	if n := messageCount(t, q); n != 0 {
		t.Errorf("%d messages left", n)
	}
}

// An item's bad input fails that item with Put's or Delete's own error,
// and the others go through; a stale receipt, a message named twice and
// an ID of no message are that item's ErrMessageNotFound.
func TestBatchBadItems(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t)
	q := e.queue(t)
	reqs := []azq.PutRequest{
		{Content: "a"},
		{Content: strings.Repeat("x", 64*1024+1)},
		{Content: "b", Options: &azq.PutOptions{VisibilityTimeout: -time.Second}},
		{Content: "c", Options: &azq.PutOptions{VisibilityTimeout: time.Hour, TimeToLive: time.Minute}},
		{Content: "d"},
		{Content: "e"},
		{Content: "f"},
	}
	res, err := q.PutBatch(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 3} {
		_, want := q.Put(bg, reqs[i].Content, reqs[i].Options)
		if want == nil || res[i].Err == nil || res[i].Err.Error() != want.Error() {
			t.Errorf("item %d: %v, Put answers %v", i, res[i].Err, want)
		}
		if res[i].Message != (azq.Message{}) {
			t.Errorf("item %d failed with a message: %+v", i, res[i].Message)
		}
	}
	got, err := q.Get(bg, 32, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, m := range got {
		contents = append(contents, m.Content)
	}
	if strings.Join(contents, " ") != "a d e f" {
		t.Fatalf("the queue holds %q, want a d e f", contents)
	}
	stale := got[1].PopReceipt
	upd, err := q.Update(bg, got[1].ID, stale, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	var otherID azq.MessageID
	otherID[15] = 1
	dels := []azq.DeleteRequest{
		{ID: got[0].ID, PopReceipt: got[0].PopReceipt},
		{ID: got[1].ID, PopReceipt: stale},                     // updated since
		{ID: got[2].ID},                                        // no receipt
		{ID: got[2].ID, PopReceipt: got[2].PopReceipt},         //
		{ID: got[2].ID, PopReceipt: got[2].PopReceipt},         // twice
		{ID: otherID, PopReceipt: got[3].PopReceipt},           // no such message
		{ID: got[3].ID, PopReceipt: azq.RemotePopReceipt("x")}, // no such receipt
		{ID: got[3].ID, PopReceipt: got[3].PopReceipt},         //
		{ID: got[1].ID, PopReceipt: upd.PopReceipt},            // its current one
		{ID: got[0].ID, PopReceipt: got[0].PopReceipt},         // deleted already
		{ID: azq.MessageID{}, PopReceipt: azq.PopReceipt{}},    // neither
	}
	errs, err := q.DeleteBatch(bg, dels)
	if err != nil {
		t.Fatal(err)
	}
	notFound := map[int]bool{1: true, 4: true, 5: true, 6: true, 9: true}
	for i, err := range errs {
		switch {
		case i == 2 || i == 10:
			want := q.Delete(bg, dels[i].ID, dels[i].PopReceipt)
			if err == nil || err.Error() != want.Error() || !errors.Is(err, azq.ErrInvalidPopReceipt) {
				t.Errorf("item %d: %v, Delete answers %v", i, err, want)
			}
		case notFound[i]:
			if !errors.Is(err, azq.ErrMessageNotFound) {
				t.Errorf("item %d: %v, want ErrMessageNotFound", i, err)
				continue
			}
			if want := q.Delete(bg, dels[i].ID, dels[i].PopReceipt); err.Error() != want.Error() {
				t.Errorf("item %d: %v, Delete answers %v", i, err, want)
			}
		case err != nil:
			t.Errorf("item %d: %v", i, err)
		}
	}
	if n := messageCount(t, q); n != 0 {
		t.Errorf("%d messages left", n)
	}
	// A batch of bad items only needs no statement, and no queue.
	missing := e.s.Named("no-such-queue")
	res, err = missing.PutBatch(bg, reqs[1:3])
	if err != nil || res[0].Err == nil || res[1].Err == nil {
		t.Errorf("PutBatch of bad items: %+v, %v", res, err)
	}
	errs, err = missing.DeleteBatch(bg, []azq.DeleteRequest{{ID: otherID}})
	if err != nil || !errors.Is(errs[0], azq.ErrInvalidPopReceipt) {
		t.Errorf("DeleteBatch of bad items: %v, %v", errs, err)
	}
}

// A batch on a queue that does not exist, or of more than MaxBatchSize
// items, fails as a whole and changes nothing; an empty one does
// nothing.
func TestBatchWholeFailures(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t)
	q := e.queue(t)
	if _, err := q.PutBatch(bg, putRequests(azq.MaxBatchSize+1, "m")); !errors.Is(err, azq.ErrOutOfRange) {
		t.Errorf("PutBatch of %d: %v", azq.MaxBatchSize+1, err)
	}
	res, err := q.PutBatch(bg, putRequests(azq.MaxBatchSize, "m"))
	if err != nil {
		t.Fatal(err)
	}
	dels := make([]azq.DeleteRequest, 0, azq.MaxBatchSize+1)
	for _, r := range res {
		dels = append(dels, azq.DeleteRequest{ID: r.Message.ID, PopReceipt: r.Message.PopReceipt})
	}
	dels = append(dels, dels[0])
	if _, err := q.DeleteBatch(bg, dels); !errors.Is(err, azq.ErrOutOfRange) {
		t.Errorf("DeleteBatch of %d: %v", len(dels), err)
	}
	if n := messageCount(t, q); n != azq.MaxBatchSize {
		t.Errorf("%d messages, want %d", n, azq.MaxBatchSize)
	}
	missing := e.s.Named("no-such-queue")
	if _, err := missing.PutBatch(bg, putRequests(2, "m")); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Errorf("PutBatch on no queue: %v", err)
	}
	if _, err := missing.DeleteBatch(bg, dels[:2]); !errors.Is(err, azq.ErrQueueNotFound) {
		t.Errorf("DeleteBatch on no queue: %v", err)
	}
	before := e.trips.n.Load()
	if res, err := q.PutBatch(bg, nil); err != nil || len(res) != 0 {
		t.Errorf("empty PutBatch: %v, %v", res, err)
	}
	if errs, err := q.DeleteBatch(bg, nil); err != nil || len(errs) != 0 {
		t.Errorf("empty DeleteBatch: %v, %v", errs, err)
	}
	if n := e.trips.n.Load() - before; n != 0 {
		t.Errorf("empty batches took %d round trips", n)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := q.PutBatch(ctx, putRequests(1, "m")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutBatch, cancelled: %v", err)
	}
	if _, err := q.DeleteBatch(ctx, dels[:1]); !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteBatch, cancelled: %v", err)
	}
	if n := messageCount(t, q); n != azq.MaxBatchSize {
		t.Errorf("%d messages, want %d", n, azq.MaxBatchSize)
	}
}

// A batch whose commit fails leaves nothing of it: a deferred constraint
// trigger that refuses one of its rows at commit fails the whole
// transaction, the good rows with it.
func TestBatchCommitFails(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t)
	q := e.queue(t)
	if _, err := e.admin.Exec(bg, `
CREATE FUNCTION `+e.schema+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
CREATE CONSTRAINT TRIGGER refuse_insert AFTER INSERT ON `+e.schema+`.messages
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	WHEN (NEW.content = convert_to('poison', 'UTF8')) EXECUTE FUNCTION `+e.schema+`.refuse();
CREATE CONSTRAINT TRIGGER refuse_delete AFTER DELETE ON `+e.schema+`.messages
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	WHEN (OLD.content = convert_to('keep', 'UTF8')) EXECUTE FUNCTION `+e.schema+`.refuse()`); err != nil {
		t.Fatal(err)
	}
	reqs := putRequests(5, "m")
	reqs[2].Content = "poison"
	if res, err := q.PutBatch(bg, reqs); err == nil {
		t.Fatalf("PutBatch with a row refused at commit: %+v", res)
	}
	if n := messageCount(t, q); n != 0 {
		t.Fatalf("a failed batch left %d messages", n)
	}

	reqs[2].Content = "keep"
	res, err := q.PutBatch(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	dels := make([]azq.DeleteRequest, len(res))
	for i, r := range res {
		dels[i] = azq.DeleteRequest{ID: r.Message.ID, PopReceipt: r.Message.PopReceipt}
	}
	if errs, err := q.DeleteBatch(bg, dels); err == nil {
		t.Fatalf("DeleteBatch with a row refused at commit: %v", errs)
	}
	if n := messageCount(t, q); n != len(reqs) {
		t.Fatalf("a failed batch left %d messages of %d", n, len(reqs))
	}
	// The receipts are still current: nothing of the batch happened.
	if _, err := e.admin.Exec(bg, "DROP TRIGGER refuse_delete ON "+e.schema+".messages"); err != nil {
		t.Fatal(err)
	}
	errs, err := q.DeleteBatch(bg, dels)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
}

// A Receive waiting on another Service returns once a PutBatch commits,
// woken by one notification for the whole batch.
func TestPutBatchNotifiesOnce(t *testing.T) {
	t.Parallel()
	srv := pgtest.Shared(t)
	producer, _ := openMock(t)
	consumer := open(t, postgres.Options{Schema: producer.Schema(), Clock: producer.Clock()})
	q := newQueue(t, producer)

	listen, err := pgx.Connect(bg, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Close(bg)
	channel := pgx.Identifier{producer.Channel()}.Sanitize()
	if _, err := listen.Exec(bg, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}

	ch := receiveAsync(bg, consumer.Named(q.Name()), azq.MaxBatchSize)
	waiting(t, consumer, q.Name(), 1, false)
	res, err := q.PutBatch(bg, putRequests(azq.MaxBatchSize, "m"))
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, ch)
	if r.err != nil || len(r.msgs) == 0 {
		t.Fatalf("Receive: %+v", r)
	}
	if r.msgs[0].ID != res[0].Message.ID {
		t.Errorf("Receive took %v first, want %v", r.msgs[0].ID, res[0].Message.ID)
	}

	// Notifications come in commit order: those of the batch, then the
	// marker.
	if _, err := listen.Exec(bg, "SELECT pg_notify($1, $2)", producer.Channel(), "end of test"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	notifications := 0
	for {
		n, err := listen.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload == "end of test" {
			break
		}
		if n.Payload == q.Name() {
			notifications++
		}
	}
	if notifications != 1 {
		t.Errorf("a batch of %d sent %d notifications, want 1", azq.MaxBatchSize, notifications)
	}
}
