package azq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/azqlib/azq/internal/durable"
	"github.com/azqlib/azq/internal/vfs"
)

// The durable mode's face: Open and its options, what it reports, and the
// journals that connect the queues to internal/durable, which holds the
// log's state machine (records, replay, checkpoints, backups). These
// durable*.go files are the only ones of the package that know it
// (seam_test.go checks).

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

// defaultCheckpointBackoff is the first wait before a failed checkpoint is
// tried again.
const defaultCheckpointBackoff = time.Second

// The record format shares these with the queue; a change to either side
// that parts them fails to compile.
const (
	_ = uint64(neverExpires-durable.NeverExpires) + uint64(durable.NeverExpires-neverExpires)
	_ = uint(MaxAccessPolicies-durable.MaxPolicies) + uint(durable.MaxPolicies-MaxAccessPolicies)
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
	if max := durable.MaxMessageSize; cfg.limits.MaxMessageSize > max {
		return nil, fmt.Errorf("azq: a durable Service stores messages up to %d bytes; Limits.MaxMessageSize is %d", max, cfg.limits.MaxMessageSize)
	}
	log, res, rec, err := durable.Open(durable.Config{
		Dir:               dir,
		FS:                cfg.fs,
		SyncInterval:      cfg.syncInterval,
		CheckpointBytes:   cfg.ckptBytes,
		CheckpointBackoff: cfg.ckptBackoff,
		AllotBytes:        cfg.allotBytes,
		Logger:            cfg.logger,
		Failed:            storageFailure,
		Closed:            func() error { return newError(ErrQueueNotFound, "", "the service is closed") },
	}, rebuilder{cfg.config})
	if err != nil {
		return nil, durableError(err)
	}
	s, stats, err := rebuilt(cfg.config, res)
	if err != nil {
		log.Abandon()
		return nil, &CorruptError{File: dir, Offset: -1, Reason: err.Error()}
	}
	stats.Checkpoint, stats.Dependencies = rec.Checkpoint, rec.Dependencies
	stats.LogBytes, stats.TornFile, stats.TornBytes = rec.LogBytes, rec.TornFile, rec.TornBytes
	stats.Duration = time.Since(start)
	d := &durableService{s: s, log: log, cfg: cfg, recovery: stats}
	s.j = d
	if l := cfg.logger; l != nil {
		l.Info("azq: recovered", "dir", dir, "queues", stats.Queues, "messages", stats.Messages,
			"checkpoint", stats.Checkpoint, "records", stats.Records, "duration", stats.Duration)
		if stats.TornFile != "" {
			l.Warn("azq: moved a torn log tail aside", "dir", dir, "file", stats.TornFile, "bytes", stats.TornBytes)
		}
	}
	log.Start(d)
	return s, nil
}

// storageFailure returns the ErrStorageFailure that the log's failure,
// cause, maps to.
func storageFailure(cause error) error {
	e := newError(ErrStorageFailure, "", "durable storage failed, so the service refuses further changes: "+cause.Error())
	e.cause = cause
	return e
}

// durableError maps internal/durable's *CorruptError to azq's, and
// returns other errors as they are.
func durableError(err error) error {
	if ce, ok := err.(*durable.CorruptError); ok {
		return &CorruptError{File: ce.File, Offset: ce.Offset, Reason: ce.Reason}
	}
	return err
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

// durableService is a durable Service's journal, and the Service as
// internal/durable sees it (durable.Host).
type durableService struct {
	s        *Service
	log      *durable.Log
	cfg      durableConfig
	recovery RecoveryStats // what Open found
}

func (d *durableService) create(q *Queue) (journal, uint64) {
	dq, lsn := d.log.NewQueue(q.qid, q.name, q.metadata)
	return (*queueJournal)(dq), lsn
}

func (d *durableService) last() uint64 { return d.log.LastLSN() }

func (d *durableService) wait(lsn uint64) error { return d.log.Wait(lsn) }

// close stops the checkpointer, writes a last checkpoint if the log holds
// anything since the newest one, closes the queues, closes the log and
// releases the directory.
func (d *durableService) close() error {
	if !d.log.Stop() {
		return nil
	}
	s := d.s
	var errs []error
	s.mu.Lock()
	failed := s.failure
	s.mu.Unlock()
	if failed != nil {
		errs = append(errs, failed)
	} else if err := d.log.LastCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	for _, q := range s.closeQueues() {
		q.mu.Lock()
		if !q.closed {
			q.shut()
		}
		q.mu.Unlock()
	}
	if err := d.log.Close(failed != nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Queues is durable.Host's: the queues a checkpoint copies.
func (d *durableService) Queues(rotate func()) ([]durable.QueueState, uint64, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure != nil || s.closed {
		return nil, 0, s.closedErr()
	}
	rotate()
	return s.queueStates(), s.nextQID, nil
}

// Fail is durable.Host's: it stops the Service after a storage failure.
func (d *durableService) Fail(err error) { d.s.fail(err) }

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

// durable returns the Service's durable side, nil for one in memory.
func (s *Service) durable() *durableService {
	d, _ := s.j.(*durableService)
	return d
}

// Checkpoint writes a checkpoint of a durable Service now and returns once
// it is durable, so that a restart replays little log; a durable Service
// writes them by itself as its log grows, and on Close. For a Service in
// memory it does nothing.
func (s *Service) Checkpoint(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := s.durable()
	if d == nil {
		return nil
	}
	err := d.log.Checkpoint(ctx)
	if errors.Is(err, durable.ErrStopped) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.closedErr()
	}
	return err
}

// DurableState returns the state of a durable Service's storage, and
// false for a Service in memory.
func (s *Service) DurableState() (DurableState, bool) {
	d := s.durable()
	if d == nil {
		return DurableState{}, false
	}
	ls := d.log.State()
	st := DurableState{Dir: d.log.Dir(), Recovery: d.recovery, LogBytes: ls.LogBytes,
		Checkpoints: ls.Checkpoints, LastCheckpoint: ls.LastCheckpoint, LastCheckpointDuration: ls.LastCheckpointDuration,
		CheckpointErr: ls.CheckpointErr, FailedCheckpoints: ls.FailedCheckpoints}
	s.mu.Lock()
	st.Failure = s.failure
	s.mu.Unlock()
	return st, true
}

// abandon stops the Service as a killed process would: the checkpointer
// ends, the log's files close with nothing buffered written, the
// directory is released. For tests of recovery.
func (s *Service) abandon() {
	s.durable().log.Abandon()
	s.closeQueues()
}

// queueJournal is a durable queue's journal: internal/durable's, given
// the queue's changes in its plain terms.
type queueJournal durable.Queue

func (j *queueJournal) dq() *durable.Queue { return (*durable.Queue)(j) }

// durableMessage returns the message n in slot as internal/durable
// records it.
func durableMessage(slot uint32, n *node) durable.Message {
	return durable.Message{Slot: slot, Seq: n.seq, ID: n.id, Content: n.content, Inserted: n.inserted,
		Visible: n.visible, Expires: n.expires, Tag: n.tag, Dequeues: n.dequeues, Version: n.version}
}

func (j *queueJournal) put(slot uint32, n *node) uint64 {
	m := durableMessage(slot, n)
	return j.dq().Put(&m)
}

func (j *queueJournal) take(slot uint32, n *node) {
	j.dq().Take(durable.Taken{Slot: slot, Dequeues: n.dequeues, Version: n.version, Tag: n.tag})
}

func (j *queueJournal) get(visible int64) uint64 { return j.dq().Get(visible) }

func (j *queueJournal) update(slot uint32, n *node, content bool) uint64 {
	m := durableMessage(slot, n)
	return j.dq().Update(&m, content)
}

func (j *queueJournal) delete(slot uint32) uint64 { return j.dq().Delete(slot) }

func (j *queueJournal) batchPut(slot uint32, n *node) {
	m := durableMessage(slot, n)
	j.dq().AddPut(&m)
}

func (j *queueJournal) putBatch() uint64 { return j.dq().PutBatch() }

func (j *queueJournal) batchDelete(slot uint32) { j.dq().AddDelete(slot) }

func (j *queueJournal) deleteBatch() uint64 { return j.dq().DeleteBatch() }

// maxDurableBatchContent is the most content a durable queue's PutBatch
// puts, all its messages together: what one log record holds.
const maxDurableBatchContent = durable.MaxBatchContent

func (j *queueJournal) clear() uint64 { return j.dq().Clear() }

func (j *queueJournal) deleteQueue() uint64 { return j.dq().DeleteQueue() }

func (j *queueJournal) metadata(md map[string]string) uint64 { return j.dq().Metadata(md) }

func (j *queueJournal) policies(ps []AccessPolicy) uint64 {
	return j.dq().Policies(durablePolicies(ps))
}

func (j *queueJournal) wait(lsn uint64) error { return j.dq().Wait(lsn) }

// durablePolicies and accessPolicies convert access policies to and from
// internal/durable's.
func durablePolicies(ps []AccessPolicy) []durable.Policy {
	if ps == nil {
		return nil
	}
	out := make([]durable.Policy, len(ps))
	for i, p := range ps {
		out[i] = durable.Policy(p)
	}
	return out
}

func accessPolicies(ps []durable.Policy) []AccessPolicy {
	if ps == nil {
		return nil
	}
	out := make([]AccessPolicy, len(ps))
	for i, p := range ps {
		out[i] = AccessPolicy(p)
	}
	return out
}
