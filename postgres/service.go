package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azqlib/azq"
	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema azq's tables go in when Options.Schema is
// empty.
const DefaultSchema = "azq"

// Options configure a Service.
type Options struct {
	// Schema is the PostgreSQL schema that holds azq's tables; "azq"
	// (DefaultSchema) if empty. Services on one database that name the
	// same schema share its queues; other schemas are separate accounts.
	Schema string
	// Clock, if set, is the clock every time comes from: a *clock.Mock in
	// tests, which then move a queue's time as they move an in-memory
	// queue's. If nil, every time comes from the database's clock, read
	// in each statement, so that the Services of many processes, whose
	// clocks may disagree, agree on one time.
	Clock clock.Clock
	// Limits replace Azure's limits for simulations; zero fields keep
	// Azure's values, as with azq.WithLimits.
	Limits azq.Limits
	// StatementTimeout bounds each statement on the database's side (the
	// connections' statement_timeout), whatever the caller's context: a
	// statement past it is canceled and rolled back, and the operation
	// fails with a DatabaseError, 500 OperationTimedOut. Zero means the
	// URL's statement_timeout if it sets one, else
	// DefaultStatementTimeout; negative, none. It applies to the pools
	// that Open and OpenConfig make and that ConfigurePool configures;
	// New uses the caller's pool as it is.
	StatementTimeout time.Duration
	// LockTimeout bounds each statement's wait for a lock (the
	// connections' lock_timeout): a row, a table that another session
	// locked, or the queue's own advisory lock. A statement past it fails
	// as one past StatementTimeout does. Zero means the URL's
	// lock_timeout if it sets one, else DefaultLockTimeout; negative,
	// none. It applies where StatementTimeout does.
	LockTimeout time.Duration
}

// The timeouts the database applies to each statement of a Service,
// unless the Options or the URL set others: Azure's 30 seconds for a
// queue operation on the server, and a third of that for a wait for a
// lock, which the back end's own statements hold for milliseconds (a
// longer wait is another session's doing: a LOCK TABLE, a migration).
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultLockTimeout      = 10 * time.Second
)

// cancelWait is how long an operation whose context ended waits for the
// database to answer the cancel request it sends (see ConfigurePool)
// before it drops the connection: a live server answers in milliseconds,
// and a frozen one does not answer at all.
const cancelWait = 500 * time.Millisecond

// ConfigurePool sets up cfg, a pool's configuration, as Open sets up its
// own: the statement and lock timeouts of opts (see Options), as the
// connections' run-time parameters; and a context that ends during a
// statement sends the database a cancel request, so that the statement
// stops and rolls back rather than running on, maybe to commit, after
// the caller was told that it failed. A statement that completed before
// the cancel reached it is reported as completed.
//
// A cancel that reaches a commit waiting for a synchronous standby does
// not roll it back: PostgreSQL has committed the transaction locally,
// warns that the standby may not have it, and reports success. The
// connections watch for that warning: the operation then fails with
// ErrNotReplicated (see DatabaseError.NotReplicated) rather than
// succeeding, and its connection is closed, not reused. It is for a
// caller that makes the pool it passes to New; cfg's own OnNotice,
// AfterConnect and PrepareConn (or BeforeAcquire), if set, still run.
func ConfigurePool(cfg *pgxpool.Config, opts *Options) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cc := cfg.ConnConfig
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	setTimeout(cc.RuntimeParams, "statement_timeout", o.StatementTimeout, DefaultStatementTimeout)
	setTimeout(cc.RuntimeParams, "lock_timeout", o.LockTimeout, DefaultLockTimeout)
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
	}
	onNotice := cc.OnNotice
	cc.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		if unreplicatedCommit(n) {
			unreplicated.Store(c, struct{}{})
		}
		if onNotice != nil {
			onNotice(c, n)
		}
	}
	afterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// A connection of the same address, long closed, may have left
		// its mark behind if it never went back to a pool.
		unreplicated.Delete(c.PgConn())
		if afterConnect != nil {
			return afterConnect(ctx, c)
		}
		return nil
	}
	prepare := cfg.PrepareConn
	if before := cfg.BeforeAcquire; prepare == nil && before != nil {
		// The pool ignores BeforeAcquire once PrepareConn is set.
		prepare = func(ctx context.Context, c *pgx.Conn) (bool, error) { return before(ctx, c), nil }
	}
	cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		// A statement outside the Service's operations (see
		// Service.retry) met the warning: the pool drops the connection
		// rather than hand it out again. (A hook on release would run on
		// a goroutine of the pool's at every release.)
		if takeUnreplicated(c.PgConn()) {
			return false, nil
		}
		if prepare != nil {
			return prepare(ctx, c)
		}
		return true, nil
	}
}

// unreplicated holds the connections (*pgconn.PgConn) on which a commit's
// wait for a synchronous standby was canceled, from the warning (see
// ConfigurePool) until the operation that ran on the connection, or the
// pool when it would hand the connection out again, takes the mark and
// closes the connection.
var unreplicated sync.Map

// takeUnreplicated reports whether c met a canceled wait for a
// synchronous standby since it was last asked, and forgets it.
func takeUnreplicated(c *pgconn.PgConn) bool {
	_, marked := unreplicated.LoadAndDelete(c)
	return marked
}

// unreplicatedCommit reports whether n is PostgreSQL's warning that a
// commit's wait for its synchronous standbys was canceled (SyncRepWaitForLSN
// in syncrep.c): by a cancel request or the session's termination, after
// the transaction committed on the primary. The message and detail are
// translated when the server's lc_messages is not English, so it is known
// by what is not: the severity (SeverityUnlocalized), the SQLSTATE, and the
// server's function that sends it (the Routine field, which every
// PostgreSQL sends); the English detail serves a server that sends no
// Routine.
func unreplicatedCommit(n *pgconn.Notice) bool {
	severity := n.SeverityUnlocalized
	if severity == "" {
		severity = n.Severity
	}
	if severity != "WARNING" || n.Code != pgWarning && n.Code != pgAdminShutdown {
		return false
	}
	return n.Routine == "SyncRepWaitForLSN" ||
		n.Routine == "" && strings.Contains(n.Detail, "already committed locally")
}

// setTimeout sets the run-time parameter name to d in milliseconds: d if
// positive, none (0) if negative, else the value params has or def.
func setTimeout(params map[string]string, name string, d, def time.Duration) {
	switch {
	case d < 0:
		params[name] = "0"
	case d > 0:
		params[name] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
	default:
		if _, ok := params[name]; !ok {
			params[name] = strconv.FormatInt(def.Milliseconds(), 10)
		}
	}
}

// Service is the queue service of one schema of a PostgreSQL database:
// azq's queue contract (azq.QueueService), with the queues and messages in
// tables, shared by every Service on the same schema, in any process. All
// methods are safe for concurrent use.
//
// Each operation is one statement (one round trip; a count, two), so the
// back end has no state of its own that another process could miss: a message put
// through one Service is got through another, and a receipt issued by one
// works on every other. Receive waits without polling, woken through the
// database's LISTEN/NOTIFY by Puts and Updates of any process, and by a
// timer for a message that is delayed.
type Service struct {
	pool    *pgxpool.Pool
	ownPool bool // Close closes pool
	schema  string
	sql     *statements
	limits  azq.Limits
	keys    lockKeys
	channel string // of the notifications of this schema's queues

	clock      clock.Clock // the Options' clock; nil: the database's
	timerClock clock.Clock // arms Receive's timers: clock, or the real one
	mock       *clock.Mock // clock, if it is a mock; see wakeAt

	closed  atomic.Bool
	closing chan struct{} // closed by Close, which ends waiting Receive calls

	mu    sync.Mutex          // guards waits and lis
	waits map[string]*waitSet // the Receive calls waiting, by queue name
	lis   *listener           // nil until a Receive first waits

	purge purgeState
}

var _ azq.QueueService = (*Service)(nil)

// Open connects to the database url (a postgres:// URL or a key=value
// connection string, as pgxpool.ParseConfig reads it), brings azq's schema
// up to date, and returns the Service. Close closes the connections.
//
// The connections have the Options' statement and lock timeouts, and a
// statement whose context ends is canceled on the database (see
// ConfigurePool).
func Open(ctx context.Context, url string, opts *Options) (*Service, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, cfg, opts)
}

// OpenConfig is Open with the pool's configuration, as
// pgxpool.ParseConfig makes it, which it sets up with ConfigurePool: for
// a caller that sets the pool's size or hooks. Close closes the pool.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config, opts *Options) (*Service, error) {
	ConfigurePool(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := newService(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New returns the Service of the caller's pool, after bringing azq's
// schema up to date. Close leaves the pool open. The pool's connections
// must not be shared with a transaction pooler in transaction mode, which
// LISTEN and the advisory locks the Service takes do not survive. New
// uses the pool as it is: the Options' timeouts, and the failure of an
// operation whose commit a synchronous standby did not confirm
// (ErrNotReplicated), apply only if the pool's configuration went
// through ConfigurePool.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Service, error) {
	return newService(ctx, pool, false, opts)
}

func newService(ctx context.Context, pool *pgxpool.Pool, own bool, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	s := &Service{
		pool:    pool,
		ownPool: own,
		schema:  o.Schema,
		sql:     newStatements(pgx.Identifier{o.Schema}.Sanitize()),
		limits:  o.Limits,
		keys:    newLockKeys(o.Schema),
		channel: channelName(o.Schema),
		clock:   o.Clock,
		closing: make(chan struct{}),
		waits:   make(map[string]*waitSet),
	}
	s.timerClock = s.clock
	if s.timerClock == nil {
		s.timerClock = clock.New()
	}
	s.mock, _ = s.clock.(*clock.Mock)
	if err := migrate(ctx, pool, o.Schema, s.keys); err != nil {
		return nil, dbError(ctx, err)
	}
	return s, nil
}

// Ping checks that the database answers and takes writes, as a health
// check does: nil, or a *DatabaseError, 503 ServerBusy when it cannot be
// reached or is a standby (in recovery), which a URL of several hosts
// without target_session_attrs=read-write may reach: it answers reads,
// but refuses every Put.
func (s *Service) Ping(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var recovering bool
	if err := s.retry(ctx, func(db querier) error {
		return db.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)
	}); err != nil {
		return dbError(ctx, err)
	}
	if recovering {
		return &DatabaseError{Err: &azq.Error{Code: codeServerBusy, StatusCode: http.StatusServiceUnavailable, Message: "the database is unavailable for writes"},
			Cause: errStandby}
	}
	return nil
}

// errStandby is the cause of Ping's error on a standby.
var errStandby = errors.New("the server is a standby, in recovery: it takes no writes (connect with target_session_attrs=read-write)")

// Pool returns the Service's connection pool.
func (s *Service) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the name of the schema that holds the Service's tables.
func (s *Service) Schema() string { return s.schema }

// Limits returns the limits the Service's queues enforce, as set in its
// Options (zero fields mean Azure's values).
func (s *Service) Limits() azq.Limits { return s.limits }

// Clock returns the clock of the Service's queues: the Options' clock, or
// the real clock when the times come from the database's.
func (s *Service) Clock() clock.Clock { return s.timerClock }

// now is the time parameter of a statement: the Service clock's reading
// in Unix nanoseconds, or nil (NULL) for the database's clock.
func (s *Service) now() any {
	if s.clock == nil {
		return nil
	}
	return clockNanos(s.clock.Now())
}

// check returns the error of an operation on a closed Service, or ctx's.
func (s *Service) check(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

// lockKeys are the keys of the advisory locks the Service takes, as the
// two 32-bit halves PostgreSQL's two-key form takes: a class, then a key
// within it. A lock of a queue is keyed by a hash of the schema and the
// queue's name; two names of one hash only wait for each other.
type lockKeys struct {
	migrate      [2]int32 // the schema's migrations
	queueClass   int32    // the class of the queues' locks
	schemaPrefix string   // hashed before a queue's name
}

// The classes of azq's advisory locks: "azq" and a number.
const (
	lockClassMigrate = 0x617a7101
	lockClassQueue   = 0x617a7102
)

func newLockKeys(schema string) lockKeys {
	return lockKeys{
		migrate:      [2]int32{lockClassMigrate, hash32(schema)},
		queueClass:   lockClassQueue,
		schemaPrefix: schema + "\x00",
	}
}

// queue returns the key of the queue name's lock.
func (k lockKeys) queue(name string) int32 { return hash32(k.schemaPrefix + name) }

func hash32(s string) int32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int32(h.Sum32())
}

// channelName is the notification channel of the schema's queues: a hash
// of the schema's name, so that it fits the 63 bytes of a channel name
// whatever the schema is called.
func channelName(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return "azq_" + strconv.FormatUint(h.Sum64(), 16)
}

// Ref returns the queue name of the service as the service contract's
// QueueRef, after checking the name (ErrInvalidQueueName), without a
// query: the queue need not exist.
func (s *Service) Ref(name string) (azq.QueueRef, error) {
	if err := azq.ValidateQueueName(name); err != nil {
		return nil, err
	}
	return s.Named(name), nil
}

// Named returns the queue name of the Service, looked up at each
// operation, as azq.Service.Named does. It does not check the name or
// create the queue: until the queue exists, every operation but Create
// gives ErrQueueNotFound.
func (s *Service) Named(name string) *Queue { return &Queue{svc: s, name: name} }

// CreateQueue creates the queue name with metadata and returns it, with
// created set, as azq.Service.CreateQueue does: a queue that exists with
// the same metadata (names compared ignoring case) is returned with
// created unset; with other metadata, ErrQueueAlreadyExists.
func (s *Service) CreateQueue(ctx context.Context, name string, metadata map[string]string) (q *Queue, created bool, err error) {
	q, err = s.Named(name), azq.ValidateQueueName(name)
	if err != nil {
		return nil, false, err
	}
	created, err = q.Create(ctx, metadata)
	if err != nil {
		return nil, false, err
	}
	return q, created, nil
}

// DeleteQueue deletes the queue name and its messages; waiting Receive
// calls, in any process, return ErrQueueNotFound. A queue that does not
// exist gives ErrQueueNotFound, an invalid name ErrInvalidQueueName, as
// Azure answers. The queue's row goes in one transaction,
// after every Put and Update in flight on it has committed; its messages,
// unreachable from then on, go after it in batches, so that deleting a
// large queue does not hold up the others.
func (s *Service) DeleteQueue(ctx context.Context, name string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := azq.ValidateQueueName(name); err != nil {
		return err
	}
	var id int64
	err := s.retry(ctx, func(db querier) error {
		id = 0
		b := &pgx.Batch{}
		b.Queue(s.sql.lockQueueExclusive, s.keys.queueClass, s.keys.queue(name))
		b.Queue(s.sql.dropQueue, name, s.channel)
		var notified string
		err := sendBatch(ctx, db, b, &id, &notified)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err
	})
	if err != nil {
		return dbError(ctx, err)
	}
	if id == 0 {
		return queueNotFound(name)
	}
	return dbError(ctx, s.removeDropped(ctx, id))
}

// removeBatch is the most messages one statement removes when a deleted
// queue's messages or expired ones are removed: enough to make progress
// against a large backlog, few enough that a statement takes milliseconds
// and holds no lock for long.
const removeBatch = 2000

// removeDropped removes the messages of the deleted queue id, a batch at
// a time.
func (s *Service) removeDropped(ctx context.Context, id int64) error {
	for {
		var n int64
		if err := s.retry(ctx, func(db querier) error {
			return db.QueryRow(ctx, s.sql.removeDropped, id, removeBatch).Scan(&n)
		}); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// ListQueues returns a page of the queues in name order, as
// azq.Service.ListQueues does. A MaxResults outside 1 to 5000 gives
// ErrOutOfRange; a marker that ListQueues did not return gives
// ErrInvalidMarker.
func (s *Service) ListQueues(ctx context.Context, opts azq.ListQueuesOptions) (azq.ListQueuesPage, error) {
	if err := s.check(ctx); err != nil {
		return azq.ListQueuesPage{}, err
	}
	max, err := opts.PageSize()
	if err != nil {
		return azq.ListQueuesPage{}, err
	}
	start := opts.Prefix
	if opts.Marker != "" {
		m, err := decodeMarker(opts.Marker)
		if err != nil {
			return azq.ListQueuesPage{}, err
		}
		if m > start {
			start = m
		}
	}
	if !storable(opts.Prefix) {
		// No queue's name starts with it (see storable).
		return azq.ListQueuesPage{}, nil
	}
	var page azq.ListQueuesPage
	err = s.retry(ctx, func(db querier) error {
		page = azq.ListQueuesPage{}
		rows, err := db.Query(ctx, s.sql.listQueues, opts.Prefix, start, max+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var names []string
			var values [][]byte
			if err := rows.Scan(&name, &names, &values); err != nil {
				return err
			}
			if len(page.Queues) == max {
				page.NextMarker = encodeMarker(name)
				break
			}
			item := azq.QueueItem{Name: name}
			if opts.IncludeMetadata {
				item.Metadata = metadataMap(names, values)
			}
			page.Queues = append(page.Queues, item)
		}
		return rows.Err()
	})
	if err != nil {
		return azq.ListQueuesPage{}, dbError(ctx, err)
	}
	return page, nil
}

// A marker names the first queue of the next page, as the in-memory
// Service's does: base64 of a version byte and the name, so that it is
// not mistaken for a name and a hand-made one is detected.
const markerVersion = '1'

func encodeMarker(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(markerVersion) + name))
}

func decodeMarker(m string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil || len(b) < 1 || b[0] != markerVersion || azq.ValidateQueueName(string(b[1:])) != nil {
		return "", &azq.Error{Code: azq.CodeInvalidMarker, StatusCode: http.StatusBadRequest,
			Message: "the marker " + quoteTrunc(m) + " was not returned by ListQueues",
			Details: []azq.Detail{{Name: "QueryParameterName", Value: "marker"}, {Name: "QueryParameterValue", Value: m}}}
	}
	return string(b[1:]), nil
}

// metadataMap builds a queue's metadata from its columns; nil if empty,
// as the in-memory queue returns it.
func metadataMap(names []string, values [][]byte) map[string]string {
	if len(names) == 0 {
		return nil
	}
	md := make(map[string]string, len(names))
	for i, k := range names {
		if i < len(values) {
			md[k] = string(values[i])
		}
	}
	return md
}

// metadataColumns splits metadata into the two columns that keep it.
func metadataColumns(md map[string]string) ([]string, [][]byte) {
	names := make([]string, 0, len(md))
	values := make([][]byte, 0, len(md))
	for k, v := range md {
		names = append(names, k)
		values = append(values, append([]byte{}, v...))
	}
	return names, values
}

// Close ends waiting Receive calls (they return ErrQueueNotFound, as on a
// closed in-memory Service), stops listening for notifications, and closes
// the connection pool if Open made it. The queues stay in the database.
// Later operations give ErrQueueNotFound. Close is idempotent.
func (s *Service) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.closing)
	s.mu.Lock()
	lis := s.lis
	for _, ws := range s.waits {
		ws.stop()
	}
	s.mu.Unlock()
	if lis != nil {
		lis.close()
	}
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// purgeState paces the removal of expired messages (see maybePurge).
type purgeState struct {
	running atomic.Bool
	mu      sync.Mutex // guards next
	next    time.Time  // on the Service's clock (the real one without)
}
