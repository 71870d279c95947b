package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azqlib/azq"
	"github.com/azqlib/azq/postgres"
	"github.com/azqlib/azq/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The server syncs, as in production: a commit waits for its write-ahead
// log to reach the disk, which is most of what a queue operation costs.
func TestMain(m *testing.M) {
	os.Exit(pgtest.MainOptions(m, pgtest.Options{Durable: true}))
}

var bg = context.Background()

// payload is every message's content: 100 bytes.
var payload = strings.Repeat("p", 100)

// env is what the benchmarks share: one pool on the server, and the
// three contenders on it, each in a schema of its own; and the schema of
// the depth benchmark's queues, apart, so that its million messages are
// not in the table the cycles are measured on, as none are in the
// floor's.
type env struct {
	url   string
	pool  *pgxpool.Pool
	svc   *postgres.Service
	deep  *postgres.Service
	floor *floor
}

var (
	envOnce sync.Once
	shared  *env
	envErr  error
)

// maxConns is the pool's size: more than the 16 callers, and what River
// and the Service's listener need beside them.
const maxConns = 40

func setUp(b *testing.B) *env {
	b.Helper()
	srv := pgtest.Shared(b)
	envOnce.Do(func() {
		cfg, err := pgxpool.ParseConfig(srv.URL())
		if err != nil {
			envErr = err
			return
		}
		cfg.MaxConns = maxConns
		pool, err := pgxpool.NewWithConfig(bg, cfg)
		if err != nil {
			envErr = err
			return
		}
		svc, err := postgres.New(bg, pool, &postgres.Options{Schema: "azq_bench"})
		if err != nil {
			envErr = err
			return
		}
		deep, err := postgres.New(bg, pool, &postgres.Options{Schema: "azq_deep"})
		if err != nil {
			envErr = err
			return
		}
		fl, err := newFloor(pool)
		if err != nil {
			envErr = err
			return
		}
		rm, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: "river"})
		if err == nil {
			_, err = pool.Exec(bg, "CREATE SCHEMA IF NOT EXISTS river")
		}
		if err == nil {
			_, err = rm.Migrate(bg, rivermigrate.DirectionUp, nil)
		}
		if err != nil {
			envErr = fmt.Errorf("River's migrations: %w", err)
			return
		}
		shared = &env{url: srv.URL(), pool: pool, svc: svc, deep: deep, floor: fl}
	})
	if envErr != nil {
		b.Fatal(envErr)
	}
	return shared
}

// floor is the bare-SQL floor: the three minimal statements of a queue of
// this design, written by hand on the same pool — insert a row; take the
// first visible one with FOR UPDATE SKIP LOCKED and hide it; delete it by
// its key — in a table with the two indexes they need. It has no queue
// names, receipts, expiry, times of its own, notifications or limits:
// what it costs is the least this design can cost.
type floor struct {
	pool *pgxpool.Pool
}

func newFloor(pool *pgxpool.Pool) (*floor, error) {
	_, err := pool.Exec(bg, `
CREATE SCHEMA IF NOT EXISTS floor;
CREATE TABLE IF NOT EXISTS floor.messages (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	visible_at timestamptz NOT NULL DEFAULT now(),
	payload bytea NOT NULL);
CREATE INDEX IF NOT EXISTS messages_visible ON floor.messages (visible_at, id)`)
	return &floor{pool: pool}, err
}

const (
	floorPut    = `INSERT INTO floor.messages (payload) VALUES ($1)`
	floorTake   = `UPDATE floor.messages SET visible_at = now() + interval '30 seconds' WHERE id = (SELECT id FROM floor.messages WHERE visible_at <= now() ORDER BY visible_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, payload`
	floorDelete = `DELETE FROM floor.messages WHERE id = $1`
)

// cycle puts, takes and deletes one message.
func (f *floor) cycle(ctx context.Context) error {
	if _, err := f.pool.Exec(ctx, floorPut, []byte(payload)); err != nil {
		return err
	}
	for {
		var id int64
		var p []byte
		err := f.pool.QueryRow(ctx, floorTake).Scan(&id, &p)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // every visible row is another caller's for the moment
		}
		if err != nil {
			return err
		}
		_, err = f.pool.Exec(ctx, floorDelete, id)
		return err
	}
}

// azqCycle puts, gets and deletes one message of q.
func azqCycle(ctx context.Context, q *postgres.Queue) error {
	if _, err := q.Put(ctx, payload, nil); err != nil {
		return err
	}
	var buf [1]azq.Message
	for {
		ms, err := q.AppendGet(ctx, buf[:0], 1, 30*time.Second)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			continue // every visible message is another caller's for the moment
		}
		return q.Delete(ctx, ms[0].ID, ms[0].PopReceipt)
	}
}

// run runs b.N cycles on callers goroutines, and then wait, if not nil,
// and reports cycles per second.
func run(b *testing.B, callers int, cycle func(context.Context) error, wait func()) {
	b.Helper()
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, callers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := cycle(bg); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	if wait != nil {
		wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
}

// BenchmarkCycle is a message's life, put, got and deleted, with 1 and 16
// callers at once: azq's PostgreSQL back end, each caller putting,
// getting and deleting in turn, and the bare-SQL floor doing the same on
// the same pool; then the work in River's shape, producers and consumers
// apart, on azq (Put; Receive and Delete) and on River (insert, and a
// worker that does nothing) on the same server.
func BenchmarkCycle(b *testing.B) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("impl=azq/callers=%d", callers), func(b *testing.B) {
			e := setUp(b)
			q, _, err := e.svc.CreateQueue(bg, "cycle", nil)
			if err != nil {
				b.Fatal(err)
			}
			run(b, callers, func(ctx context.Context) error { return azqCycle(ctx, q) }, nil)
		})
		b.Run(fmt.Sprintf("impl=floor/callers=%d", callers), func(b *testing.B) {
			e := setUp(b)
			run(b, callers, e.floor.cycle, nil)
		})
		b.Run(fmt.Sprintf("impl=azq-receive/callers=%d", callers), func(b *testing.B) {
			azqPipeline(b, setUp(b), callers)
		})
		b.Run(fmt.Sprintf("impl=river/callers=%d", callers), func(b *testing.B) {
			riverCycles(b, setUp(b), callers)
		})
	}
}

// azqPipeline is River's shape of the work on azq: callers producers
// Put, and as many consumers Receive up to 32 messages at a time and
// Delete each; a cycle is a message deleted.
func azqPipeline(b *testing.B, e *env, callers int) {
	// A queue of each run's own: a consumer of the run before, stopped
	// by its context, may have had a Get on its way to the server, which
	// the server still runs, and which would take a message of this run
	// for the visibility timeout.
	q, _, err := e.svc.CreateQueue(bg, fmt.Sprintf("pipeline-%d-%d", os.Getpid(), pipelineRuns.Add(1)), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	// The consumers start before the timer, and one message put and
	// deleted first has each of them waiting: the timed part is the
	// work, not 16 Receive calls registering on a new queue, which took
	// up to a second of a probe run (b.N = 1) on a loaded machine and
	// then made the run's b.N too small to hide it.
	var deleted atomic.Int64
	target := int64(b.N) + 1
	warm := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.Receive(ctx, 32, 30*time.Second)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					panic(err)
				}
				for _, m := range ms {
					if err := q.Delete(ctx, m.ID, m.PopReceipt); err != nil {
						panic(err)
					}
					switch deleted.Add(1) {
					case 1:
						close(warm)
					case target:
						close(done)
					}
				}
			}
		}()
	}
	if _, err := q.Put(ctx, payload, nil); err != nil {
		b.Fatal(err)
	}
	<-warm
	run(b, callers, func(ctx context.Context) error {
		_, err := q.Put(ctx, payload, nil)
		return err
	}, func() { <-done })
	cancel()
	wg.Wait()
}

var pipelineRuns atomic.Int64

// noopArgs is River's job: the payload, and no work.
type noopArgs struct {
	Payload string `json:"p"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverCycles inserts b.N jobs from callers goroutines and waits until a
// client with callers workers has completed them all. River is set for
// throughput: it fetches at most every millisecond (FetchCooldown, 100 ms
// by default, caps its throughput), and its inserts notify the client;
// completed jobs stay in the table, as River keeps them by default, and
// are removed after the measurement.
func riverCycles(b *testing.B, e *env, callers int) {
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{
		Schema:            "river",
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: callers}},
		Workers:           workers,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: 1 << 20})
	defer cancel()
	if err := client.Start(bg); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, c := context.WithTimeout(bg, time.Minute)
		defer c()
		client.Stop(ctx)
		e.pool.Exec(bg, "DELETE FROM river.river_job")
	}()
	done := make(chan struct{})
	go func() {
		for n := 0; n < b.N; n++ {
			<-events
		}
		close(done)
	}()
	run(b, callers, func(ctx context.Context) error {
		_, err := client.Insert(ctx, noopArgs{Payload: payload}, nil)
		return err
	}, func() { <-done })
}

// deepMessages is the depth of the deep queue.
const deepMessages = 1_000_000

var (
	deepOnce sync.Once
	deepErr  error
)

// fillDeep makes the queue "deep" hold deepMessages visible messages,
// written by one statement, and the queue "shallow" none, in the same
// table, of the schema azq_deep.
func fillDeep(b *testing.B, e *env) {
	deepOnce.Do(func() {
		for _, name := range []string{"deep", "shallow"} {
			if _, _, deepErr = e.deep.CreateQueue(bg, name, nil); deepErr != nil {
				return
			}
		}
		// A server kept across rounds (see run) has them already.
		var have int
		if deepErr = e.pool.QueryRow(bg, `SELECT count(*) FROM azq_deep.messages m, azq_deep.queues q
			WHERE q.name = 'deep' AND m.queue_id = q.id`).Scan(&have); deepErr != nil || have >= deepMessages {
			return
		}
		start := time.Now()
		_, deepErr = e.pool.Exec(bg, `
INSERT INTO azq_deep.messages (id_rand, queue_id, inserted_at, visible_at, expires_at, tag, content)
SELECT (random() * 4e18)::bigint, q.id, t.now, t.now, t.now + 7 * 86400 * 1000000000::bigint, 1, convert_to($2, 'UTF8')
FROM azq_deep.queues q, generate_series(1, $1),
	(SELECT (extract(epoch FROM now()) * 1000000)::bigint * 1000 AS now) t
WHERE q.name = 'deep'`, deepMessages, payload)
		if deepErr == nil {
			_, deepErr = e.pool.Exec(bg, "VACUUM ANALYZE azq_deep.messages")
		}
		b.Logf("wrote %d messages in %v", deepMessages, time.Since(start))
	})
	if deepErr != nil {
		b.Fatal(deepErr)
	}
}

// BenchmarkDepth is the cycle of one caller on a queue of 1,000,000
// visible messages (each Get takes the oldest, so the queue stays that
// deep) and on an empty queue of the same table.
func BenchmarkDepth(b *testing.B) {
	for _, c := range []struct {
		name  string
		queue string
	}{{"messages=0", "shallow"}, {"messages=1000000", "deep"}} {
		b.Run(c.name, func(b *testing.B) {
			e := setUp(b)
			fillDeep(b, e)
			q := e.deep.Named(c.queue)
			run(b, 1, func(ctx context.Context) error { return azqCycle(ctx, q) }, nil)
		})
	}
}

// BenchmarkCount is ApproximateCount of the queue of 1,000,000 messages
// and of the empty one beside it: what a monitor that reads each queue's
// count pays per queue and scrape, since PostgreSQL keeps no count of a
// queue's rows that it could read instead of counting them.
func BenchmarkCount(b *testing.B) {
	for _, c := range []struct {
		name  string
		queue string
	}{{"messages=0", "shallow"}, {"messages=1000000", "deep"}} {
		b.Run(c.name, func(b *testing.B) {
			e := setUp(b)
			fillDeep(b, e)
			q := e.deep.Named(c.queue)
			for b.Loop() {
				if _, err := q.ApproximateCount(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReceiveWakeup is the time from a Put through one Service to
// the return of a Receive waiting on another, with a pool of its own:
// the Put's commit, the notification's trip through the database, the
// wake-up, and the Get. Between two messages the consumer deletes the
// message and is left 20 ms to be waiting again, outside the timer.
// BenchmarkPutThenGet is its floor: the same Put, and then at once the
// same Get through the other Service, with no waiting.
// consumer is a second Service on the benchmarks' schema, with a pool of
// its own, as another process would have; it is closed when b ends.
func (e *env) consumer(b *testing.B) *postgres.Service {
	pool, err := pgxpool.New(bg, e.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	svc, err := postgres.New(bg, pool, &postgres.Options{Schema: "azq_bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	return svc
}

func BenchmarkReceiveWakeup(b *testing.B) {
	e := setUp(b)
	consumer := e.consumer(b)
	p, _, err := e.svc.CreateQueue(bg, "wakeup", nil)
	if err != nil {
		b.Fatal(err)
	}
	c := consumer.Named("wakeup")
	got := make(chan error)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	go func() {
		for {
			ms, err := c.Receive(ctx, 1, time.Minute)
			if ctx.Err() != nil {
				return
			}
			got <- err
			if err == nil {
				err = c.Delete(ctx, ms[0].ID, ms[0].PopReceipt)
			}
			if err != nil && ctx.Err() == nil {
				panic(err)
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StartTimer()
		if _, err := p.Put(bg, payload, nil); err != nil {
			b.Fatal(err)
		}
		if err := <-got; err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkPutThenGet(b *testing.B) {
	e := setUp(b)
	consumer := e.consumer(b)
	p, _, err := e.svc.CreateQueue(bg, "put-then-get", nil)
	if err != nil {
		b.Fatal(err)
	}
	c := consumer.Named("put-then-get")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StartTimer()
		if _, err := p.Put(bg, payload, nil); err != nil {
			b.Fatal(err)
		}
		ms, err := c.Get(bg, 1, time.Minute)
		if err != nil || len(ms) != 1 {
			b.Fatal(ms, err)
		}
		b.StopTimer()
		if err := c.Delete(bg, ms[0].ID, ms[0].PopReceipt); err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statements counts the statements a pool sends.
type statements struct{ n atomic.Int64 }

func (c *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }
func (c *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// BenchmarkIdleReceive is the cost of Receive calls that wait on empty
// queues: 100 of them, one a queue, each iteration a millisecond of
// waiting. It reports the statements their Service sends per second of
// it, which should be none.
func BenchmarkIdleReceive(b *testing.B) {
	e := setUp(b)
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		b.Fatal(err)
	}
	counter := &statements{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(bg, pool, &postgres.Options{Schema: "azq_bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	const waiters = 100
	for i := 0; i < waiters; i++ {
		q, _, err := s.CreateQueue(bg, fmt.Sprintf("idle-%d", i), nil)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Receive(ctx, 1, time.Minute)
		}()
	}
	// Let every Receive reach its wait: its Gets and registration done.
	for last := int64(-1); last != counter.n.Load(); {
		last = counter.n.Load()
		time.Sleep(200 * time.Millisecond)
	}
	start, before := time.Now(), counter.n.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(counter.n.Load()-before)/time.Since(start).Seconds(), "statements/s")
	cancel()
	wg.Wait()
}

// batchSize is the size of every batch of BenchmarkBatch: a full one.
const batchSize = azq.MaxBatchSize

// The batched floor's statements: insert a batch of rows; take the first
// batchSize visible ones with FOR UPDATE SKIP LOCKED and hide them;
// delete them by an array of keys. The rows are picked in a CTE of their
// own, as azq's Get picks them: as an IN (subquery), the subquery may run
// again for a row another caller changed, and the UPDATE then takes more
// rows than the LIMIT.
const (
	floorPutBatch    = `INSERT INTO floor.messages (payload) SELECT unnest($1::bytea[])`
	floorTakeBatch   = `WITH picked AS MATERIALIZED (SELECT id FROM floor.messages WHERE visible_at <= now() ORDER BY visible_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) UPDATE floor.messages m SET visible_at = now() + interval '30 seconds' FROM picked p WHERE m.id = p.id RETURNING m.id, m.payload`
	floorDeleteBatch = `DELETE FROM floor.messages WHERE id = ANY($1)`
)

// putBatch puts batchSize rows.
func (f *floor) putBatch(ctx context.Context) error {
	payloads := make([][]byte, batchSize)
	for i := range payloads {
		payloads[i] = []byte(payload)
	}
	_, err := f.pool.Exec(ctx, floorPutBatch, payloads)
	return err
}

// takeBatch takes up to batchSize rows and deletes them, and returns how
// many.
func (f *floor) takeBatch(ctx context.Context) (int, error) {
	rows, err := f.pool.Query(ctx, floorTakeBatch, batchSize)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	_, err = f.pool.Exec(ctx, floorDeleteBatch, ids)
	return len(ids), err
}

// putRequests is a batch of batchSize payloads.
func putRequests() []azq.PutRequest {
	reqs := make([]azq.PutRequest, batchSize)
	for i := range reqs {
		reqs[i].Content = payload
	}
	return reqs
}

// settle deletes msgs in one DeleteBatch, every one of which must go.
func settle(ctx context.Context, q *postgres.Queue, msgs []azq.Message) error {
	dels := make([]azq.DeleteRequest, len(msgs))
	for i, m := range msgs {
		dels[i] = azq.DeleteRequest{ID: m.ID, PopReceipt: m.PopReceipt}
	}
	errs, err := q.DeleteBatch(ctx, dels)
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// putBatch puts batchSize messages on q with PutBatch.
func putBatch(ctx context.Context, q *postgres.Queue) error {
	res, err := q.PutBatch(ctx, putRequests())
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// takeBatch gets up to batchSize messages of q and settles them with
// DeleteBatch, and returns how many.
func takeBatch(ctx context.Context, q *postgres.Queue, buf []azq.Message) (int, error) {
	ms, err := q.AppendGet(ctx, buf[:0], batchSize, 30*time.Second)
	if err != nil || len(ms) == 0 {
		return 0, err
	}
	return len(ms), settle(ctx, q, ms)
}

// runBatches runs b.N cycles, rounded up to whole batches, on callers
// goroutines, each putting a batch and then taking one (up to batchSize
// messages, which may be others'), until every batch is put and every
// message taken; it reports the messages per second, so that the rate
// compares with BenchmarkCycle's. take returns how many it took.
func runBatches(b *testing.B, callers int, put func(context.Context) error, take func(context.Context) (int, error)) {
	b.Helper()
	batches := (b.N + batchSize - 1) / batchSize
	total := int64(batches * batchSize)
	var left, taken atomic.Int64
	left.Store(int64(batches))
	errs := make(chan error, callers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if left.Add(-1) >= 0 {
					if err := put(bg); err != nil {
						errs <- err
						return
					}
				} else if taken.Load() >= total {
					return
				}
				n, err := take(bg)
				if err != nil {
					errs <- err
					return
				}
				taken.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "cycles/s")
}

// runPutBatches is run with a batch a cycle: b.N messages, rounded up to
// whole batches, put batch by batch by callers goroutines, then wait;
// it reports messages per second.
func runPutBatches(b *testing.B, callers int, put func(context.Context) error, wait func()) {
	b.Helper()
	batches := (b.N + batchSize - 1) / batchSize
	var left atomic.Int64
	left.Store(int64(batches))
	errs := make(chan error, callers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := put(bg); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(batches*batchSize)/elapsed.Seconds(), "cycles/s")
}

// BenchmarkBatch is BenchmarkCycle with batches of 32 (a cycle is still
// a message's life, put, got and deleted): azq's PostgreSQL back end,
// each caller putting a batch with PutBatch, then getting up to 32 and
// settling them with DeleteBatch, in turn, and the batched floor doing
// the same in bare SQL on the same pool; then the work in River's shape,
// producers and consumers apart, on azq (PutBatch; Receive of 32 and
// DeleteBatch) and on River (InsertMany of 32, and workers that do
// nothing, whose completions River's batch completer settles).
func BenchmarkBatch(b *testing.B) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("impl=azq/callers=%d", callers), func(b *testing.B) {
			e := setUp(b)
			q, _, err := e.svc.CreateQueue(bg, "batch", nil)
			if err != nil {
				b.Fatal(err)
			}
			runBatches(b, callers, func(ctx context.Context) error { return putBatch(ctx, q) },
				func(ctx context.Context) (int, error) { return takeBatch(ctx, q, make([]azq.Message, 0, batchSize)) })
		})
		b.Run(fmt.Sprintf("impl=floor/callers=%d", callers), func(b *testing.B) {
			e := setUp(b)
			runBatches(b, callers, e.floor.putBatch, e.floor.takeBatch)
		})
		b.Run(fmt.Sprintf("impl=azq-receive/callers=%d", callers), func(b *testing.B) {
			azqBatchPipeline(b, setUp(b), callers)
		})
		b.Run(fmt.Sprintf("impl=river/callers=%d", callers), func(b *testing.B) {
			riverBatches(b, setUp(b), callers)
		})
	}
}

// azqBatchPipeline is azqPipeline with batches: callers producers
// PutBatch, and as many consumers Receive up to 32 messages at a time
// and settle them with one DeleteBatch.
func azqBatchPipeline(b *testing.B, e *env, callers int) {
	q, _, err := e.svc.CreateQueue(bg, fmt.Sprintf("batch-pipeline-%d-%d", os.Getpid(), pipelineRuns.Add(1)), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	// As in azqPipeline, one message first has every consumer waiting
	// before the timer starts.
	var deleted atomic.Int64
	target := int64((b.N+batchSize-1)/batchSize*batchSize) + 1
	warm := make(chan struct{})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.Receive(ctx, batchSize, 30*time.Second)
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					err = settle(ctx, q, ms)
				}
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					panic(err)
				}
				n := deleted.Add(int64(len(ms)))
				if n-int64(len(ms)) < 1 && n >= 1 {
					close(warm)
				}
				if n-int64(len(ms)) < target && n >= target {
					close(done)
				}
			}
		}()
	}
	if _, err := q.Put(ctx, payload, nil); err != nil {
		b.Fatal(err)
	}
	<-warm
	runPutBatches(b, callers, func(ctx context.Context) error { return putBatch(ctx, q) }, func() { <-done })
	cancel()
	wg.Wait()
}

// riverBatches inserts b.N jobs, rounded up to whole batches, from
// callers goroutines with InsertMany, and waits until a client has
// completed them all, set as riverCycles sets it, with 32 workers a
// caller: River fetches as many jobs at a time as it has free workers,
// so that is what gives it batches of 32 to fetch, as azq's consumers
// take. Its completions go through its batch completer, which River
// always uses for a client that works jobs.
func riverBatches(b *testing.B, e *env, callers int) {
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{
		Schema:            "river",
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: callers * batchSize}},
		Workers:           workers,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: 1 << 20})
	defer cancel()
	if err := client.Start(bg); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, c := context.WithTimeout(bg, time.Minute)
		defer c()
		client.Stop(ctx)
		e.pool.Exec(bg, "DELETE FROM river.river_job")
	}()
	total := (b.N + batchSize - 1) / batchSize * batchSize
	done := make(chan struct{})
	go func() {
		for n := 0; n < total; n++ {
			<-events
		}
		close(done)
	}()
	params := make([]river.InsertManyParams, batchSize)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{Payload: payload}}
	}
	runPutBatches(b, callers, func(ctx context.Context) error {
		_, err := client.InsertMany(ctx, params)
		return err
	}, func() { <-done })
}
