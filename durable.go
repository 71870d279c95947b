package azq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/azqlib/azq/internal/vfs"
	"github.com/azqlib/azq/internal/wal"
)

// CodeInternalError is Azure's code for a failure of the service itself,
// which azq answers when a durable Service cannot write its log.
const CodeInternalError ErrorCode = "InternalError"

// ErrStorageFailure: a durable Service (Open) failed to write or sync its
// log. The change that met the failure was not acknowledged and may or may
// not survive a restart; every later operation of the Service fails with
// this error too, because after a failed sync the file's state is unknown
// and a retry that succeeds would prove nothing. Close the Service and
// Open the directory again to recover what is on disk. InternalError, 500.
// The Error unwraps to the failure of the file system.
var ErrStorageFailure = &Error{Code: CodeInternalError, StatusCode: 500,
	Message: "durable storage failed"}

// DefaultCheckpointBytes is the log size after which a durable Service
// writes a checkpoint.
const DefaultCheckpointBytes = 64 << 20

// durableConfig is the configuration of a durable Service: that of every
// Service, and the durable mode's own.
type durableConfig struct {
	config
	syncInterval time.Duration // 0: sync every operation
	ckptBytes    int64
	logger       *slog.Logger
	fs           vfs.FS        // nil: the operating system's
	ckptBackoff  time.Duration // the first wait before retrying a failed checkpoint
	allotBytes   int64         // zeros allotted to a log segment at a time; 0: the log's default
}

type durableOption func(*durableConfig)

func (o durableOption) applyDurable(c *durableConfig) { o(c) }

// WithSyncInterval makes a durable Service acknowledge a change once it is
// written to the operating system, and sync it to disk at most d later. A
// crash of the process loses nothing acknowledged; a crash of the machine
// (power cut, kernel panic) loses at most the changes of the last d. By
// default, and for d of zero or less, a change is acknowledged only once
// it is synced to disk (fdatasync), and concurrent callers share one sync
// (group commit), so the cost per operation falls as concurrency rises.
func WithSyncInterval(d time.Duration) DurableOption {
	return durableOption(func(c *durableConfig) { c.syncInterval = max(d, 0) })
}

// WithCheckpointBytes sets the log size after which a durable Service
// writes a checkpoint, a copy of its state that lets recovery skip the log
// before it, so that recovery replays about that much log at most. Zero
// or less means DefaultCheckpointBytes.
func WithCheckpointBytes(n int64) DurableOption {
	return durableOption(func(c *durableConfig) { c.ckptBytes = n })
}

// WithLogger makes a durable Service log to l: what recovery found (info;
// a torn log tail moved aside, warn), each checkpoint (debug), a failed
// checkpoint (error) and a storage failure (error). By default it logs
// nothing; DurableState reports the same.
func WithLogger(l *slog.Logger) DurableOption {
	return durableOption(func(c *durableConfig) { c.logger = l })
}

// withFS makes a durable Service use fs instead of the operating system's
// file system; tests inject faults and crashes with it. It also allots
// log segments testAllotBytes at a time (withAllotBytes after it
// overrides that).
func withFS(fs vfs.FS) DurableOption {
	return durableOption(func(c *durableConfig) { c.fs, c.allotBytes = fs, testAllotBytes })
}

// testAllotBytes is the allotment of withFS: small, since the in-memory
// file system of the tests copies every byte written, and a megabyte of
// zeros per segment was most of what their crash loops cost under -race.
const testAllotBytes = 16 << 10

// withCheckpointBackoff sets the first wait before a failed checkpoint is
// tried again; tests shorten it.
func withCheckpointBackoff(d time.Duration) DurableOption {
	return durableOption(func(c *durableConfig) { c.ckptBackoff = d })
}

// withAllotBytes sets how many zeros a log segment is allotted at a time
// (wal.Options.AllotBytes); 0 is the log's default. What a crash leaves and
// what recovery finds do not depend on it: it is only how many zeros
// follow the frames, and how often more are allotted.
func withAllotBytes(n int64) DurableOption {
	return durableOption(func(c *durableConfig) { c.allotBytes = n })
}

const (
	defaultCheckpointBackoff = time.Second
	maxCheckpointBackoff     = time.Minute
)

// RecoveryStats describe what Open found in its directory.
type RecoveryStats struct {
	Queues     int    // queues recovered
	Messages   int    // messages recovered, not counting those expired by now
	Checkpoint string // the checkpoint file loaded; "" if none
	// Dependencies are the older checkpoint files it refers to for the
	// parts of the state that had not changed since they were written.
	Dependencies []string
	Records      int           // log records replayed after it
	LogBytes     int64         // bytes of log records replayed
	Duration     time.Duration // how long recovery took
	// A torn log tail, the end of a write that a crash cut short and that
	// was never acknowledged: the file its bytes were moved to, and how
	// many there were. "" and 0 if there was none.
	TornFile  string
	TornBytes int64
}

// DurableState describes the on-disk side of a durable Service.
type DurableState struct {
	Dir      string        // the directory
	Recovery RecoveryStats // what Open found
	// LogBytes is the log written since the last checkpoint: what
	// recovery would replay now.
	LogBytes int64
	// Checkpoints counts the checkpoints written since Open.
	Checkpoints int
	// LastCheckpoint is when the last one was done, and
	// LastCheckpointDuration how long it took; zero if none was.
	LastCheckpoint         time.Time
	LastCheckpointDuration time.Duration
	// CheckpointErr is the error of the last attempt at a checkpoint, nil
	// if it succeeded; FailedCheckpoints counts the failed attempts since
	// the last success. A failed checkpoint loses nothing (the log still
	// holds everything) and is tried again after a back-off that grows
	// from a second to a minute; meanwhile the log grows.
	CheckpointErr     error
	FailedCheckpoints int
	// Failure is the storage failure (ErrStorageFailure) that stopped the
	// Service, or nil.
	Failure error
}

// durable is the on-disk side of a Service opened with Open.
type durable struct {
	svc *Service
	dir string
	log *wal.Log
	cfg durableConfig

	// The checkpointer: a goroutine of the Service's that writes
	// checkpoints when the log asks (wal.Log.Due), when Checkpoint asks
	// (requests), and to retry a failed one, until stop is closed; done is
	// closed when it has ended.
	stop      chan struct{}
	done      chan struct{}
	requests  chan chan error
	closeOnce sync.Once

	failOnce sync.Once
	failErr  *Error // the ErrStorageFailure the log's failure maps to

	// testSink, set by tests only, wraps the checkpoint file's sink.
	testSink func(recordSink) recordSink

	mu       sync.Mutex // guards the fields below
	state    DurableState
	ckptBase uint64   // the last log record the newest checkpoint holds
	copyGens []uint64 // the checkpoints holding the chunk copies the queues refer to
}

// Open returns a durable Service whose queues, metadata, access policies
// and messages live in the directory dir (created if need be) and survive
// the process. Every change an operation acknowledges (returns without
// error) is in a log on disk first, synced unless WithSyncInterval says
// otherwise; on Open the last checkpoint and the log after it are
// replayed, so the Service comes back with the same message IDs, times,
// dequeue counts and current pop receipts, and a consumer holding a
// receipt across a restart can still Update or Delete. Expired messages
// stay expired: expiry is judged by the clock, as in memory. DurableState
// reports what recovery found.
//
// A goroutine of the Service writes a checkpoint in the background each
// time the log passes WithCheckpointBytes; Close stops it, writes a last
// checkpoint, syncs the log and releases the directory.
//
// Only one Service may have dir open: a second Open, from this process or
// another, fails while the first is open. A log or checkpoint damaged
// anywhere but at the very end of the log (where a crash can cut a write
// short, which was then never acknowledged) gives a *CorruptError naming
// the file and offset, never a partial queue; so does a missing file.
//
// A durable Service behaves exactly like one from NewService, except that
// its operations can also fail with ErrStorageFailure.
func Open(dir string, opts ...DurableOption) (*Service, error) {
	start := time.Now()
	cfg := durableConfig{config: defaultConfig(), ckptBytes: DefaultCheckpointBytes, ckptBackoff: defaultCheckpointBackoff}
	for _, o := range opts {
		o.applyDurable(&cfg)
	}
	cfg.config = cfg.config.withDefaults()
	if cfg.ckptBytes <= 0 {
		cfg.ckptBytes = DefaultCheckpointBytes
	}
	if max := wal.MaxRecord - 1024; cfg.limits.MaxMessageSize > max {
		return nil, fmt.Errorf("azq: a durable Service stores messages up to %d bytes; Limits.MaxMessageSize is %d", max, cfg.limits.MaxMessageSize)
	}
	d := &durable{dir: dir, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), requests: make(chan chan error)}
	r := newReplayer(cfg.config)
	log, rec, err := wal.Open(dir, wal.Options{
		FS:              cfg.fs,
		SyncInterval:    cfg.syncInterval,
		CheckpointBytes: cfg.ckptBytes,
		OnFailure:       d.onFailure,
		AllotBytes:      cfg.allotBytes,
	}, wal.Replay{Dependency: r.dependencyRecord, Checkpoint: r.checkpointRecord, Record: r.logRecord})
	if err != nil {
		return nil, openError(dir, err)
	}
	s, stats, err := r.service()
	if err != nil {
		log.Abandon()
		return nil, &CorruptError{File: dir, Offset: -1, Reason: err.Error()}
	}
	stats.Checkpoint, stats.Dependencies = rec.Checkpoint, rec.Dependencies
	stats.LogBytes, stats.TornFile, stats.TornBytes = rec.Bytes, rec.TornFile, rec.TornBytes
	stats.Duration = time.Since(start)
	d.svc, d.log, d.ckptBase = s, log, rec.Base
	d.state = DurableState{Dir: dir, Recovery: stats}
	s.dur = d
	// What the checkpoint holds of each queue, for the next, incremental
	// one.
	gens := map[uint64]bool{}
	for _, rq := range r.queues {
		for i := range rq.copies {
			if cp := &rq.copies[i]; cp.gen == ownCheckpoint {
				cp.gen = rec.Gen
			}
		}
		rq.addGens(gens)
		rq.q.wal = &queueLog{d: d, chunkHistory: rq.chunkHistory}
	}
	d.copyGens = slices.Sorted(maps.Keys(gens))
	if l := cfg.logger; l != nil {
		l.Info("azq: recovered", "dir", dir, "queues", stats.Queues, "messages", stats.Messages,
			"checkpoint", stats.Checkpoint, "records", stats.Records, "duration", stats.Duration)
		if stats.TornFile != "" {
			l.Warn("azq: moved a torn log tail aside", "dir", dir, "file", stats.TornFile, "bytes", stats.TornBytes)
		}
	}
	go d.checkpointer()
	return s, nil
}

// openError maps an error of the log's Open to azq's.
func openError(dir string, err error) error {
	if ce := corruptError(err); ce != nil {
		return ce
	}
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("azq: cannot open %s: %w", dir, err)
	}
	return fmt.Errorf("azq: opening %s: %w", dir, err)
}

// corruptError returns the log's *CorruptError in err as azq's, or nil if
// err holds none.
func corruptError(err error) *CorruptError {
	var ce *wal.CorruptError
	if !errors.As(err, &ce) {
		return nil
	}
	return &CorruptError{File: ce.File, Offset: ce.Offset, Reason: ce.Reason}
}

// CorruptError reports damage in a durable Service's directory that is
// not a torn tail: a record that fails its checksum or does not decode,
// with valid data after it, a file that ends early, a file that is missing
// (Offset -1, and Reason starts "missing"), or records that contradict
// each other (Offset -1, and File is the directory). azq refuses to open
// such a directory rather than recover part of a queue; so does Restore
// with such a backup.
type CorruptError struct {
	File   string // the file's path
	Offset int64  // where the damaged record starts; -1 if no one record is
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("azq: %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("azq: %s is corrupt at offset %d: %s", e.File, e.Offset, e.Reason)
}

// queueLog is a durable queue's way to the log, and what the checkpoints
// hold of it, for incremental checkpoints. The queue's lock guards it.
type queueLog struct {
	d   *durable
	rec []byte // scratch for encoding a record
	chunkHistory
}

// chunkHistory is what incremental checkpoints know of a queue's chunks:
// changed[c] is the LSN of the last record that changed chunk c of the
// slot store, reset that of the last one that changed them all (the
// creation, Clear); copies[c] is the checkpoint holding chunk c whole, and
// as of which LSN (gen 0: none). A chunk not changed since its copy goes
// into the next checkpoint as a reference to that copy.
type chunkHistory struct {
	changed []uint64
	reset   uint64
	copies  []chunkCopy
}

// chunkCopy says which checkpoint holds a chunk whole, as of which LSN.
type chunkCopy struct{ gen, lsn uint64 }

// touch records that the record lsn changed the chunk of slot.
func (h *chunkHistory) touch(slot uint32, lsn uint64) {
	c := int(slot >> chunkShift)
	if c >= len(h.changed) {
		h.changed = append(h.changed, make([]uint64, c+1-len(h.changed))...)
	}
	h.changed[c] = lsn
}

// copyOf returns the copy of chunk c that an incremental checkpoint can
// refer to: one no record has changed since it was made.
func (h *chunkHistory) copyOf(c uint32) (chunkCopy, bool) {
	if int(c) >= len(h.copies) || h.copies[c].gen == 0 {
		return chunkCopy{}, false
	}
	cp := h.copies[c]
	if h.reset > cp.lsn || int(c) < len(h.changed) && h.changed[c] > cp.lsn {
		return chunkCopy{}, false
	}
	return cp, true
}

// setCopy records that checkpoint cp.gen holds chunk c whole as of cp.lsn.
func (h *chunkHistory) setCopy(c uint32, cp chunkCopy) {
	if int(c) >= len(h.copies) {
		h.copies = append(h.copies, make([]chunkCopy, int(c)+1-len(h.copies))...)
	}
	h.copies[c] = cp
}

// addGens adds to gens the checkpoints that hold the copies of the chunks.
func (h *chunkHistory) addGens(gens map[uint64]bool) {
	for _, cp := range h.copies {
		if cp.gen != 0 {
			gens[cp.gen] = true
		}
	}
}

// wait returns once record lsn is durable (see wal.Log.Wait).
func (l *queueLog) wait(lsn uint64) error { return l.d.wait(lsn) }

// The records of changes, appended by the operations while they hold the
// queue's lock; each returns the record's LSN for wait.

// appendRecord appends the record b, encoded in q.wal.rec's array.
func (q *Queue) appendRecord(b []byte) uint64 {
	lsn := q.wal.d.log.Append(b)
	q.wal.rec = b
	if cap(b) > 64<<10 {
		q.wal.rec = nil // a large message's; do not keep it
	}
	return lsn
}

func (q *Queue) logPut(slot uint32, n *node) uint64 {
	lsn := q.appendRecord(appendPut(q.wal.rec[:0], q.qid, slot, n))
	q.wal.touch(slot, lsn)
	return lsn
}

func (q *Queue) logGet(visible int64, msgs []Message) uint64 {
	lsn := q.appendRecord(appendGet(q.wal.rec[:0], q.qid, visible, msgs))
	for i := range msgs {
		q.wal.touch(msgs[i].PopReceipt.slotNo, lsn)
	}
	return lsn
}

func (q *Queue) logUpdate(slot uint32, n *node, content *string) uint64 {
	lsn := q.appendRecord(appendUpdate(q.wal.rec[:0], q.qid, slot, n, content))
	q.wal.touch(slot, lsn)
	return lsn
}

func (q *Queue) logDelete(slot uint32) uint64 {
	lsn := q.appendRecord(appendDelete(q.wal.rec[:0], q.qid, slot))
	q.wal.touch(slot, lsn)
	return lsn
}

// logOp logs a record of op with no fields but the queue: Clear, Delete
// Queue.
func (q *Queue) logOp(op byte) uint64 {
	lsn := q.appendRecord(appendQueueOp(q.wal.rec[:0], op, q.qid))
	if op == recClear {
		q.wal.reset = lsn
	}
	return lsn
}

func (q *Queue) logMetadata(md map[string]string) uint64 {
	return q.appendRecord(appendMetadata(q.wal.rec[:0], q.qid, md))
}

func (q *Queue) logPolicies(ps []AccessPolicy) uint64 {
	return q.appendRecord(appendPolicies(q.wal.rec[:0], q.qid, ps))
}

func (q *Queue) logCreate() uint64 {
	lsn := q.appendRecord(appendCreateQueue(q.wal.rec[:0], q.qid, q.name, q.metadata))
	q.wal.reset = lsn
	return lsn
}

// wait returns once record lsn is durable, mapping the log's errors to
// azq's: the log's failure to ErrStorageFailure, which also stops the
// Service, and a closed log to a closed Service.
func (d *durable) wait(lsn uint64) error {
	err := d.log.Wait(lsn)
	if err == nil {
		return nil
	}
	e := d.storageErr(err)
	if errors.Is(e, ErrStorageFailure) {
		d.svc.fail(e)
	}
	return e
}

// storageErr maps an error of the log to azq's.
func (d *durable) storageErr(err error) error {
	if errors.Is(err, wal.ErrClosed) {
		return newError(ErrQueueNotFound, "", "the service is closed")
	}
	var fe *wal.FailedError
	if !errors.As(err, &fe) {
		return err
	}
	d.failOnce.Do(func() {
		d.failErr = newError(ErrStorageFailure, "", "durable storage failed, so the service refuses further changes: "+err.Error())
		d.failErr.cause = err
	})
	return d.failErr
}

// onFailure is the log's failure callback, for failures that no waiting
// operation reports: those of an interval sync or a checkpoint.
func (d *durable) onFailure(err error) {
	e := d.storageErr(err)
	if d.svc != nil {
		d.svc.fail(e)
	}
	if l := d.cfg.logger; l != nil {
		l.Error("azq: durable storage failed; the service refuses further changes", "dir", d.dir, "err", err)
	}
}

// fail stops the Service after a storage failure: every queue refuses
// further operations with err, and waiting Receive calls return it.
func (s *Service) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil {
		return
	}
	s.failure = err
	s.queues.Scan(func(_ string, q *Queue) bool {
		q.mu.Lock()
		if !q.closed {
			q.failure = err
			q.closed = true
			q.stopWakeTimer()
			q.wakeWaiters()
		}
		q.mu.Unlock()
		return true
	})
}

// checkpointer is the Service's goroutine that writes checkpoints off the
// request path: when the log has grown past WithCheckpointBytes, when
// Checkpoint asks, and after a failure, once a back-off has passed (the
// log's signals meanwhile are ignored, so a failing disk does not make
// every operation's growth of the log start another attempt).
func (d *durable) checkpointer() {
	defer close(d.done)
	var (
		retry   *time.Timer
		retryC  <-chan time.Time
		backoff time.Duration
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		var reply chan error
		select {
		case <-d.stop:
			return
		case <-d.log.Due():
			if retryC != nil {
				continue // backing off
			}
		case <-retryC:
			retryC = nil
		case reply = <-d.requests:
		}
		err := d.svc.checkpoint()
		if reply != nil {
			reply <- err
		}
		switch {
		case err == nil:
			backoff, retryC = 0, nil
		case errors.Is(err, ErrStorageFailure), errors.Is(err, ErrQueueNotFound):
			return // the Service has failed or is closing: no checkpoint will do
		default:
			backoff = min(max(2*backoff, d.cfg.ckptBackoff), maxCheckpointBackoff)
			if retry != nil {
				retry.Stop()
			}
			retry = time.NewTimer(backoff)
			retryC = retry.C
			if l := d.cfg.logger; l != nil {
				l.Error("azq: checkpoint failed; the log keeps everything, and the checkpoint is tried again", "dir", d.dir, "err", err, "retry_in", backoff)
			}
		}
	}
}

// Checkpoint writes a checkpoint of a durable Service now and returns once
// it is durable, so that a restart replays little log; a durable Service
// writes them by itself as its log grows, and on Close. For a Service in
// memory it does nothing.
func (s *Service) Checkpoint(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := s.dur
	if d == nil {
		return nil
	}
	reply := make(chan error, 1)
	select {
	case d.requests <- reply:
	case <-d.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.closedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DurableState returns the state of a durable Service's storage, and
// false for a Service in memory.
func (s *Service) DurableState() (DurableState, bool) {
	d := s.dur
	if d == nil {
		return DurableState{}, false
	}
	d.mu.Lock()
	st := d.state
	d.mu.Unlock()
	st.LogBytes = d.log.Bytes()
	s.mu.Lock()
	st.Failure = s.failure
	s.mu.Unlock()
	return st, true
}

// checkpoint writes a checkpoint and records how it went.
func (s *Service) checkpoint() error {
	d := s.dur
	start := time.Now()
	base, err := s.writeCheckpoint()
	took := time.Since(start)
	d.mu.Lock()
	if err == nil {
		d.state.Checkpoints++
		d.state.LastCheckpoint, d.state.LastCheckpointDuration = time.Now(), took
		d.state.CheckpointErr, d.state.FailedCheckpoints = nil, 0
		d.ckptBase = base
	} else {
		d.state.CheckpointErr = err
		d.state.FailedCheckpoints++
	}
	d.mu.Unlock()
	if l := d.cfg.logger; l != nil && err == nil {
		l.Debug("azq: checkpoint written", "dir", d.dir, "duration", took)
	}
	return err
}

// closeDurable stops the checkpointer, writes a last checkpoint if the
// log holds anything since the newest one, closes the log and releases
// the directory.
func (s *Service) closeDurable() error {
	d := s.dur
	first := false
	d.closeOnce.Do(func() {
		first = true
		close(d.stop)
	})
	if !first {
		return nil
	}
	<-d.done
	var errs []error
	s.mu.Lock()
	failed := s.failure
	s.mu.Unlock()
	d.mu.Lock()
	base := d.ckptBase
	d.mu.Unlock()
	if failed != nil {
		errs = append(errs, failed)
	} else if d.log.LastLSN() > base {
		if err := s.checkpoint(); err != nil {
			errs = append(errs, fmt.Errorf("azq: %s: the last checkpoint: %w", d.dir, err))
		}
	}
	for _, q := range s.closeQueues() {
		q.mu.Lock()
		if !q.closed {
			q.shut()
		}
		q.mu.Unlock()
	}
	if err := d.log.Close(); err != nil && failed == nil {
		if e := d.storageErr(err); errors.Is(e, ErrStorageFailure) {
			errs = append(errs, e)
		} else {
			errs = append(errs, fmt.Errorf("azq: closing %s: %w", d.dir, err))
		}
	}
	return errors.Join(errs...)
}

// abandon stops the Service as a killed process would: the checkpointer
// ends, the log's files close with nothing buffered written, the
// directory is released. For tests of recovery.
func (s *Service) abandon() {
	d := s.dur
	d.closeOnce.Do(func() { close(d.stop) })
	<-d.done
	d.log.Abandon()
	s.closeQueues()
}
