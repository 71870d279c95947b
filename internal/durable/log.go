package durable

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

// MaxMessageSize is the largest content a Log stores in a message: a Put
// record, content and all, must fit one record of the log.
const MaxMessageSize = wal.MaxRecord - 1024

// MaxBatchContent is the most content, all messages together, that one
// PutBatch record holds: a record of the log, less room for the other
// fields of the 32 messages a batch has at most.
const MaxBatchContent = wal.MaxRecord - 64<<10

// maxCheckpointBackoff is the longest wait before a failed checkpoint is
// tried again.
const maxCheckpointBackoff = time.Minute

// CorruptError is the log's report of damage in a directory or a backup.
type CorruptError = wal.CorruptError

// ErrStopped: the checkpointer has stopped, because the Service failed or
// is closing.
var ErrStopped = errors.New("durable: the checkpointer has stopped")

// Config configures a Log.
type Config struct {
	Dir             string
	FS              vfs.FS        // nil: the operating system's
	SyncInterval    time.Duration // 0: sync every change (see wal.Options)
	CheckpointBytes int64         // the log size after which a checkpoint is due
	// CheckpointBackoff is the first wait before a failed checkpoint is
	// tried again; it doubles up to a minute.
	CheckpointBackoff time.Duration
	AllotBytes        int64        // see wal.Options; 0: the log's default
	Logger            *slog.Logger // nil: none

	// Failed returns the error a storage failure, cause, maps to: the
	// one every operation of the Service returns from then on. It is
	// called once.
	Failed func(cause error) error
	// Closed returns the error of an operation that meets the log closed.
	Closed func() error
}

// Recovery is what Open found in the directory besides the state.
type Recovery struct {
	Checkpoint   string   // the checkpoint file loaded; "" if none
	Dependencies []string // the older checkpoint files it refers to
	LogBytes     int64    // bytes of log records replayed
	// A torn log tail moved aside: the file, and its bytes.
	TornFile  string
	TornBytes int64
}

// State is what a Log reports of its checkpoints.
type State struct {
	LogBytes               int64 // the log written since the last checkpoint
	Checkpoints            int   // written since Open
	LastCheckpoint         time.Time
	LastCheckpointDuration time.Duration
	CheckpointErr          error // of the last attempt; nil if it succeeded
	FailedCheckpoints      int   // failed attempts since the last success
}

// Log is a durable Service's log and checkpoints: the journals of its
// queues append to it, and its checkpointer copies the Service's state
// through the Host.
type Log struct {
	dir string
	cfg Config
	log *wal.Log

	// The checkpointer: a goroutine that writes checkpoints when the log
	// asks (wal.Log.Due), when Checkpoint asks (requests), and to retry a
	// failed one, until stop is closed; done is closed when it has ended.
	stop     chan struct{}
	done     chan struct{}
	requests chan chan error
	stopOnce sync.Once

	failOnce sync.Once
	failErr  error // the error the log's failure maps to (Config.Failed)

	// testSink, set by tests only (SetTestSink), wraps the checkpoint
	// file's sink.
	testSink func(Sink) Sink

	mu       sync.Mutex // guards the fields below
	host     Host       // nil until Start
	state    State
	ckptBase uint64   // the last log record the newest checkpoint holds
	copyGens []uint64 // the checkpoints holding the chunk copies the queues refer to
}

// Open opens the log in cfg.Dir and replays it, and the newest checkpoint
// before it, into queues made by b. Start starts the Log once the Service
// the queues make up is built; a Service that cannot be built must
// Abandon the Log instead. A damaged directory gives a *CorruptError.
func Open(cfg Config, b Builder) (*Log, Result, Recovery, error) {
	l := &Log{dir: cfg.Dir, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), requests: make(chan chan error)}
	r := NewReplayer(b)
	r.log = l
	log, rec, err := wal.Open(cfg.Dir, wal.Options{
		FS:              cfg.FS,
		SyncInterval:    cfg.SyncInterval,
		CheckpointBytes: cfg.CheckpointBytes,
		OnFailure:       l.onFailure,
		AllotBytes:      cfg.AllotBytes,
	}, wal.Replay{Dependency: r.DependencyRecord, Checkpoint: r.CheckpointRecord, Record: r.LogRecord})
	if err != nil {
		return nil, Result{}, Recovery{}, openError(cfg.Dir, err)
	}
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
	}
	res, err := r.Result()
	if err != nil {
		log.Abandon()
		return nil, Result{}, Recovery{}, &CorruptError{File: cfg.Dir, Offset: -1, Reason: err.Error()}
	}
	l.log, l.ckptBase = log, rec.Base
	l.copyGens = slices.Sorted(maps.Keys(gens))
	return l, res, Recovery{Checkpoint: rec.Checkpoint, Dependencies: rec.Dependencies, LogBytes: rec.Bytes,
		TornFile: rec.TornFile, TornBytes: rec.TornBytes}, nil
}

// openError maps an error of the log's Open to azq's.
func openError(dir string, err error) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, vfs.ErrLocked) {
		return fmt.Errorf("azq: cannot open %s: %w", dir, err)
	}
	return fmt.Errorf("azq: opening %s: %w", dir, err)
}

// Start gives the Log the Service it keeps, and starts the checkpointer.
func (l *Log) Start(h Host) {
	l.mu.Lock()
	l.host = h
	l.mu.Unlock()
	go l.checkpointer()
}

// Queue is a queue's journal: its way to the log, and what the checkpoints
// hold of it, for incremental checkpoints. The queue's lock guards it: its
// methods that append a record are called with the lock held, in the order
// of the changes they record, and return the record's number for Wait,
// which is called with the lock released, so that concurrent changes share
// a sync.
type Queue struct {
	log   *Log
	qid   uint64
	rec   []byte    // scratch for encoding a record
	taken []Taken   // the messages Take gathered for the next Get record
	puts  []Message // the messages AddPut gathered for the next PutBatch record
	dels  []uint32  // the slots AddDelete gathered for the next DeleteBatch record
	chunkHistory
}

// NewQueue returns the journal of a new queue, number qid, and appends
// the record of its creation. The Service's lock must be held, so that the
// creation is ordered with the checkpoints' rotations of the log.
func (l *Log) NewQueue(qid uint64, name string, md map[string]string) (*Queue, uint64) {
	q := &Queue{log: l, qid: qid}
	lsn := q.append(appendCreateQueue(nil, qid, name, md))
	q.reset = lsn
	return q, lsn
}

// append appends the record b, encoded in q.rec's array.
func (q *Queue) append(b []byte) uint64 {
	lsn := q.log.log.Append(b)
	q.rec = b
	if cap(b) > 64<<10 {
		q.rec = nil // a large message's; do not keep it
	}
	return lsn
}

// Put records the message m put.
func (q *Queue) Put(m *Message) uint64 {
	lsn := q.append(appendPut(q.rec[:0], q.qid, m))
	q.touch(m.Slot, lsn)
	return lsn
}

// Take gathers a message that a Get took, for the Get's record.
func (q *Queue) Take(t Taken) { q.taken = append(q.taken, t) }

// Get records a Get that took the messages Take gathered, hiding them
// until visible.
func (q *Queue) Get(visible int64) uint64 {
	lsn := q.append(appendGet(q.rec[:0], q.qid, visible, q.taken))
	for i := range q.taken {
		q.touch(q.taken[i].Slot, lsn)
	}
	q.taken = q.taken[:0]
	return lsn
}

// AddPut gathers a message that a PutBatch put, for the batch's record.
func (q *Queue) AddPut(m *Message) { q.puts = append(q.puts, *m) }

// PutBatch records the Puts that AddPut gathered, in their order, as one
// record: a crash keeps all of them or none.
func (q *Queue) PutBatch() uint64 {
	lsn := q.append(appendPutBatch(q.rec[:0], q.qid, q.puts))
	for i := range q.puts {
		q.touch(q.puts[i].Slot, lsn)
	}
	clear(q.puts) // let the contents go
	q.puts = q.puts[:0]
	return lsn
}

// AddDelete gathers the deletion of the message in slot by a
// DeleteBatch, for the batch's record.
func (q *Queue) AddDelete(slot uint32) { q.dels = append(q.dels, slot) }

// DeleteBatch records the deletions that AddDelete gathered, in their
// order, as one record.
func (q *Queue) DeleteBatch() uint64 {
	lsn := q.append(appendDeleteBatch(q.rec[:0], q.qid, q.dels))
	for _, slot := range q.dels {
		q.touch(slot, lsn)
	}
	q.dels = q.dels[:0]
	return lsn
}

// Update records an Update that left the message m as it is, and changed
// its content if hasContent.
func (q *Queue) Update(m *Message, hasContent bool) uint64 {
	lsn := q.append(appendUpdate(q.rec[:0], q.qid, m.Slot, m.Visible, m.Version, m.Tag, hasContent, m.Content))
	q.touch(m.Slot, lsn)
	return lsn
}

// Delete records the deletion of the message in slot.
func (q *Queue) Delete(slot uint32) uint64 {
	lsn := q.append(appendDelete(q.rec[:0], q.qid, slot))
	q.touch(slot, lsn)
	return lsn
}

// Clear records a Clear.
func (q *Queue) Clear() uint64 {
	lsn := q.append(appendQueueOp(q.rec[:0], recClear, q.qid))
	q.reset = lsn
	return lsn
}

// DeleteQueue records the deletion of the queue.
func (q *Queue) DeleteQueue() uint64 {
	return q.append(appendQueueOp(q.rec[:0], recDeleteQueue, q.qid))
}

// Metadata records new metadata.
func (q *Queue) Metadata(md map[string]string) uint64 {
	return q.append(appendMetadata(q.rec[:0], q.qid, md))
}

// Policies records new access policies.
func (q *Queue) Policies(ps []Policy) uint64 {
	return q.append(appendPolicies(q.rec[:0], q.qid, ps))
}

// Wait returns once record lsn is durable (see Log.Wait).
func (q *Queue) Wait(lsn uint64) error { return q.log.Wait(lsn) }

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

// LastLSN returns the number of the last record appended.
func (l *Log) LastLSN() uint64 { return l.log.LastLSN() }

// Wait returns once record lsn is durable, mapping the log's errors: its
// failure to Config.Failed's error, which also stops the Service (Host.Fail),
// and a closed log to Config.Closed's.
func (l *Log) Wait(lsn uint64) error {
	err := l.log.Wait(lsn)
	if err == nil {
		return nil
	}
	e := l.storageErr(err)
	if isFailure(err) {
		l.fail(e)
	}
	return e
}

// isFailure reports whether err is the log's failure.
func isFailure(err error) bool {
	var fe *wal.FailedError
	return errors.As(err, &fe)
}

// isFinal reports whether err, of the log, ends the checkpointer: the
// log failed or is closed.
func isFinal(err error) bool { return errors.Is(err, wal.ErrClosed) || isFailure(err) }

// storageErr maps an error of the log to the Service's.
func (l *Log) storageErr(err error) error {
	if errors.Is(err, wal.ErrClosed) {
		return l.cfg.Closed()
	}
	if !isFailure(err) {
		return err
	}
	l.failOnce.Do(func() { l.failErr = l.cfg.Failed(err) })
	return l.failErr
}

// fail stops the Service, if the Log has one yet, after the failure err.
func (l *Log) fail(err error) {
	l.mu.Lock()
	h := l.host
	l.mu.Unlock()
	if h != nil {
		h.Fail(err)
	}
}

// onFailure is the log's failure callback, for failures that no waiting
// operation reports: those of an interval sync or a checkpoint.
func (l *Log) onFailure(err error) {
	l.fail(l.storageErr(err))
	if lg := l.cfg.Logger; lg != nil {
		lg.Error("azq: durable storage failed; the service refuses further changes", "dir", l.dir, "err", err)
	}
}

// checkpointer is the Log's goroutine that writes checkpoints off the
// request path: when the log has grown past Config.CheckpointBytes, when
// Checkpoint asks, and after a failure, once a back-off has passed (the
// log's signals meanwhile are ignored, so a failing disk does not make
// every operation's growth of the log start another attempt).
func (l *Log) checkpointer() {
	defer close(l.done)
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
		case <-l.stop:
			return
		case <-l.log.Due():
			if retryC != nil {
				continue // backing off
			}
		case <-retryC:
			retryC = nil
		case reply = <-l.requests:
		}
		final, err := l.checkpoint()
		if reply != nil {
			reply <- err
		}
		switch {
		case err == nil:
			backoff, retryC = 0, nil
		case final:
			return // the Service has failed or is closing: no checkpoint will do
		default:
			backoff = min(max(2*backoff, l.cfg.CheckpointBackoff), maxCheckpointBackoff)
			if retry != nil {
				retry.Stop()
			}
			retry = time.NewTimer(backoff)
			retryC = retry.C
			if lg := l.cfg.Logger; lg != nil {
				lg.Error("azq: checkpoint failed; the log keeps everything, and the checkpoint is tried again", "dir", l.dir, "err", err, "retry_in", backoff)
			}
		}
	}
}

// Checkpoint has the checkpointer write a checkpoint now and returns once
// it is durable; ErrStopped if the checkpointer has stopped.
func (l *Log) Checkpoint(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.requests <- reply:
	case <-l.done:
		return ErrStopped
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

// CheckpointNow writes a checkpoint on the caller's goroutine, as the
// checkpointer does. Tests write checkpoints with it at the moments they
// choose.
func (l *Log) CheckpointNow() error {
	_, err := l.checkpoint()
	return err
}

// checkpoint writes a checkpoint and records how it went; final reports
// an error after which no checkpoint will do.
func (l *Log) checkpoint() (final bool, err error) {
	start := time.Now()
	base, final, err := l.writeCheckpoint()
	took := time.Since(start)
	l.mu.Lock()
	if err == nil {
		l.state.Checkpoints++
		l.state.LastCheckpoint, l.state.LastCheckpointDuration = time.Now(), took
		l.state.CheckpointErr, l.state.FailedCheckpoints = nil, 0
		l.ckptBase = base
	} else {
		l.state.CheckpointErr = err
		l.state.FailedCheckpoints++
	}
	l.mu.Unlock()
	if lg := l.cfg.Logger; lg != nil && err == nil {
		lg.Debug("azq: checkpoint written", "dir", l.dir, "duration", took)
	}
	return final, err
}

// State returns what the Log reports of its checkpoints.
func (l *Log) State() State {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	st.LogBytes = l.log.Bytes()
	return st
}

// Stop stops the checkpointer and waits for it to end. It reports whether
// this call stopped it, rather than an earlier one.
func (l *Log) Stop() bool {
	first := false
	l.stopOnce.Do(func() {
		first = true
		close(l.stop)
	})
	<-l.done
	return first
}

// LastCheckpoint writes a last checkpoint after Stop, if the log holds
// anything since the newest one.
func (l *Log) LastCheckpoint() error {
	l.mu.Lock()
	base := l.ckptBase
	l.mu.Unlock()
	if l.log.LastLSN() <= base {
		return nil
	}
	if _, err := l.checkpoint(); err != nil {
		return fmt.Errorf("azq: %s: the last checkpoint: %w", l.dir, err)
	}
	return nil
}

// Close closes the log, which releases the directory, after Stop and the
// last checkpoint, and reports its error unless the Service had failed
// already (failed).
func (l *Log) Close(failed bool) error {
	err := l.log.Close()
	if err == nil || failed {
		return nil
	}
	if e := l.storageErr(err); isFailure(err) {
		return e
	}
	return fmt.Errorf("azq: closing %s: %w", l.dir, err)
}

// Abandon stops the Log as a killed process would: the checkpointer
// ends, the log's files close with nothing buffered written, the
// directory is released. For tests of recovery.
func (l *Log) Abandon() {
	l.Stop()
	l.log.Abandon()
}

// WAL returns the log itself, for tests and benchmarks that read its
// statistics or sync it.
func (l *Log) WAL() *wal.Log { return l.log }

// SetTestSink makes the checkpoints pass their records through wrap's
// sink, which tests use to run changes between the records.
func (l *Log) SetTestSink(wrap func(Sink) Sink) { l.testSink = wrap }

// Done returns a channel closed once the checkpointer has ended.
func (l *Log) Done() <-chan struct{} { return l.done }

// Dir returns the Log's directory.
func (l *Log) Dir() string { return l.dir }
