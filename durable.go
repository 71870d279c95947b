package azq

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/btree"
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
var ErrStorageFailure = &Error{Code: CodeInternalError, StatusCode: http.StatusInternalServerError,
	Message: "durable storage failed"}

// SyncPolicy says when a durable Service makes a change durable before
// acknowledging it. See SyncEveryOp and SyncInterval.
type SyncPolicy struct {
	interval time.Duration
}

// SyncEveryOp, the default, acknowledges a change only once it is synced
// to disk (fsync): a power cut loses nothing acknowledged. Concurrent
// callers share one sync (group commit), so the cost per operation falls
// as concurrency rises.
var SyncEveryOp = SyncPolicy{}

// SyncInterval acknowledges a change once it is written to the operating
// system, and syncs to disk at most d later. A crash of the process loses
// nothing acknowledged; a crash of the machine (power cut, kernel panic)
// loses at most the changes of the last d. A d of zero or less is
// SyncEveryOp.
func SyncInterval(d time.Duration) SyncPolicy {
	if d < 0 {
		d = 0
	}
	return SyncPolicy{interval: d}
}

// WithSync sets the sync policy of a durable Service (Open); other
// Services ignore it.
func WithSync(p SyncPolicy) Option {
	return func(c *config) { c.sync = p }
}

// DefaultCheckpointBytes is the log size after which a durable Service
// writes a checkpoint.
const DefaultCheckpointBytes = 64 << 20

// WithCheckpointBytes sets the log size after which a durable Service
// (Open) writes a checkpoint, a snapshot of its state that lets it start
// the log anew, so that recovery replays at most about that much log. Zero
// or less means DefaultCheckpointBytes.
func WithCheckpointBytes(n int64) Option {
	return func(c *config) { c.ckptBytes = n }
}

// withFS makes a durable Service use fs instead of the real file system;
// tests inject faults with it.
func withFS(fs fsys) Option {
	return func(c *config) { c.fs = fs }
}

// durable is the on-disk side of a Service opened with Open.
//
// The directory holds a lock file, log segments wal-N and snapshots
// snap-N (N a 16-digit hex generation). snap-N holds the state made by
// every record of the segments before wal-N, so recovery loads the newest
// snapshot and replays wal-N, wal-N+1, ... in order; with no snapshot it
// replays from wal-1. A checkpoint starts segment N+1, writes snap-N+1
// beside it the safe way (temporary file, fsync, rename, fsync of the
// directory), and only then removes the older files.
type durable struct {
	dir  string
	fs   fsys
	lock io.Closer
	w    *wal

	ckptMu sync.Mutex // serializes checkpoints; guards gen
	gen    uint64     // generation of the current segment
}

func segName(dir string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("wal-%016x", gen))
}

func snapName(dir string, gen uint64) string {
	return filepath.Join(dir, fmt.Sprintf("snap-%016x", gen))
}

// parseGen reads the generation of a file named prefix-N.
func parseGen(name, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok || len(rest) != 16 {
		return 0, false
	}
	g, err := strconv.ParseUint(rest, 16, 64)
	return g, err == nil
}

// RecoveryStats describe what Open found in its directory.
type RecoveryStats struct {
	Queues   int           // queues recovered
	Messages int           // messages recovered, not counting those expired by now
	Records  int           // log records replayed after the snapshot
	Duration time.Duration // how long recovery took
}

// Open returns a durable Service whose queues, metadata, access policies
// and messages live in the directory dir (created if need be) and survive
// the process. Every change an operation acknowledges (returns without
// error) is in a log on disk first, as the sync policy (WithSync) defines
// it; on Open the last snapshot and the log after it are replayed, so the
// Service comes back with the same message IDs, times, dequeue counts and
// current pop receipts, and a consumer holding a receipt across a restart
// can still Update or Delete. Expired messages stay expired: expiry is
// judged by the clock, as in memory.
//
// Only one Service may have dir open: a second Open, from this process or
// another, fails while the first is open. Close writes a checkpoint and
// releases the directory. A log or snapshot that is damaged anywhere but
// at the very end (where a crash can cut a record short, which was then
// never acknowledged) gives a *CorruptError naming the file and offset,
// never a partial queue.
//
// A durable Service behaves exactly like one from NewService, except that
// its operations can also fail with ErrStorageFailure.
func Open(dir string, opts ...Option) (*Service, error) {
	s, _, err := OpenStats(dir, opts...)
	return s, err
}

// OpenStats is Open that also reports what recovery found and how long it
// took.
func OpenStats(dir string, opts ...Option) (*Service, RecoveryStats, error) {
	start := time.Now()
	cfg := newConfig(opts)
	if cfg.limits.MaxMessageSize > maxFrame-1024 {
		return nil, RecoveryStats{}, fmt.Errorf("azq: a durable Service stores messages up to %d bytes; Limits.MaxMessageSize is %d", maxFrame-1024, cfg.limits.MaxMessageSize)
	}
	fs := cfg.fs
	if fs == nil {
		fs = osFS{}
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
	}
	lock, err := fs.Lock(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
	}
	s, stats, err := recoverService(dir, fs, cfg, lock)
	if err != nil {
		lock.Close()
		return nil, RecoveryStats{}, err
	}
	stats.Duration = time.Since(start)
	return s, stats, nil
}

// replayer rebuilds a Service from snapshot and log records.
type replayer struct {
	s       *Service
	byQID   map[uint64]*Queue
	nextQID uint64
	records int
}

func recoverService(dir string, fs fsys, cfg config, lock io.Closer) (*Service, RecoveryStats, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
	}
	var segs, snaps []uint64
	for _, n := range names {
		if g, ok := parseGen(n, "wal"); ok {
			segs = append(segs, g)
		} else if g, ok := parseGen(n, "snap"); ok {
			snaps = append(snaps, g)
		} else if strings.HasSuffix(n, ".tmp") {
			// A snapshot whose writing a crash interrupted.
			fs.Remove(filepath.Join(dir, n))
		}
	}
	slices.Sort(segs)
	slices.Sort(snaps)

	r := &replayer{s: &Service{cfg: cfg, queues: new(btree.Map[string, *Queue])}, byQID: map[uint64]*Queue{}, nextQID: 1}
	first := uint64(1)
	if len(snaps) > 0 {
		first = snaps[len(snaps)-1]
		name := snapName(dir, first)
		data, err := fs.ReadFile(name)
		if err != nil {
			return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
		}
		if err := r.loadSnapshot(name, data); err != nil {
			return nil, RecoveryStats{}, err
		}
	}
	// The segments from first on, with no gap.
	i := sort.Search(len(segs), func(i int) bool { return segs[i] >= first })
	segs = segs[i:]
	for j, g := range segs {
		if g != first+uint64(j) {
			return nil, RecoveryStats{}, fmt.Errorf("azq: %s is missing: the log has a gap", segName(dir, first+uint64(j)))
		}
	}
	gen := first
	if len(segs) > 0 {
		gen = segs[len(segs)-1]
	}
	var tailEnd int64 = -1
	for j, g := range segs {
		name := segName(dir, g)
		data, err := fs.ReadFile(name)
		if err != nil {
			return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
		}
		last := j == len(segs)-1
		end, err := scanFrames(name, data, last, func(_ int64, p []byte) error { return r.apply(p) })
		if err != nil {
			return nil, RecoveryStats{}, err
		}
		if last && end < int64(len(data)) {
			tailEnd = end
		}
	}
	s := r.s
	stats := RecoveryStats{Records: r.records}
	for _, q := range r.byQID {
		if _, dup := s.queues.Get(q.name); dup {
			return nil, RecoveryStats{}, fmt.Errorf("azq: %s: the log leaves two queues named %q", dir, q.name)
		}
		q.store.rebuildFree()
		// Messages that expired while the log was written, or since,
		// go now, as the next operation would purge them.
		q.purgeExpired(q.now())
		s.queues.Set(q.name, q)
		stats.Queues++
		stats.Messages += q.count
	}
	s.nextQID = r.nextQID

	// Append to the last segment, cutting off a torn tail first: a record
	// appended after it would otherwise sit behind damage.
	name := segName(dir, gen)
	f, err := fs.OpenRW(name)
	if err == nil && tailEnd >= 0 {
		err = f.Truncate(tailEnd)
		if err == nil {
			err = f.Sync()
		}
	}
	if err == nil && len(segs) == 0 {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, RecoveryStats{}, fmt.Errorf("azq: %w", err)
	}
	ckpt := cfg.ckptBytes
	if ckpt <= 0 {
		ckpt = DefaultCheckpointBytes
	}
	w := &wal{f: f, name: name, interval: cfg.sync.interval, ckptBytes: ckpt}
	if tailEnd >= 0 {
		w.size = tailEnd
	} else if data, err := fs.ReadFile(name); err == nil {
		w.size = int64(len(data))
	}
	w.alloc = w.size
	w.cond.L = &w.mu
	w.onFail = s.fail
	w.checkpoint = func() { s.checkpoint() }
	s.dur = &durable{dir: dir, fs: fs, lock: lock, w: w, gen: gen}
	for _, q := range r.byQID {
		q.wal = w
	}
	return s, stats, nil
}

// apply replays one log record.
func (r *replayer) apply(p []byte) error {
	r.records++
	d := dec{b: p}
	op := d.byte()
	qid := d.u()
	if d.err != nil {
		return d.err
	}
	if op == recCreateQueue {
		name := d.str()
		md := d.metadata()
		if err := d.done(); err != nil {
			return err
		}
		if _, ok := r.byQID[qid]; ok || qid < r.nextQID {
			return fmt.Errorf("queue %d is created twice", qid)
		}
		q := newQueue(name, r.s.cfg, md)
		q.svc, q.qid = r.s, qid
		r.byQID[qid] = q
		r.nextQID = qid + 1
		return nil
	}
	q := r.byQID[qid]
	if q == nil {
		return fmt.Errorf("record of type %d for queue %d, which does not exist", op, qid)
	}
	switch op {
	case recDeleteQueue:
		if err := d.done(); err != nil {
			return err
		}
		delete(r.byQID, qid)
	case recMetadata:
		md := d.metadata()
		if err := d.done(); err != nil {
			return err
		}
		q.metadata = md
	case recPolicies:
		ps := d.policies()
		if err := d.done(); err != nil {
			return err
		}
		q.policies = ps
	case recPut:
		slot := d.u32()
		// Put takes a freed slot or the next new one, never one beyond.
		if slot > q.store.next {
			return fmt.Errorf("put into slot %d, beyond the next new slot %d", slot, q.store.next)
		}
		var n node
		n.id = d.id()
		n.inserted = d.i()
		vis := d.u()
		n.expires = d.expiry(n.inserted)
		n.tag = d.u64()
		n.content = d.str()
		if err := d.done(); err != nil {
			return err
		}
		if vis > uint64(neverExpires-n.inserted) {
			return errors.New("next-visible time is out of range")
		}
		n.visible = n.inserted + int64(vis)
		q.seq++
		n.seq = q.seq
		q.restore(slot, n, true)
	case recGet:
		visible := d.i()
		cnt := d.u()
		if cnt > uint64(len(d.b)) {
			return errShortRecord
		}
		for ; cnt > 0; cnt-- {
			slot, dq, ver, tag := d.u32(), d.u(), d.u32(), d.u64()
			if d.err != nil {
				return d.err
			}
			n := q.store.lookup(slot)
			if n == nil {
				return fmt.Errorf("get of slot %d, which is empty", slot)
			}
			if dq > 1<<31-1 {
				return fmt.Errorf("dequeue count %d is out of range", dq)
			}
			q.vis.remove(n)
			n.visible, n.dequeues, n.version, n.tag = visible, int32(dq), ver, tag
			q.vis.add(slot, n, false)
		}
		return d.done()
	case recUpdate:
		slot, visible, ver, tag := d.u32(), d.i(), d.u32(), d.u64()
		hasContent := d.byte()
		var content string
		if hasContent == 1 {
			content = d.str()
		}
		if err := d.done(); err != nil {
			return err
		}
		n := q.store.lookup(slot)
		if n == nil {
			return fmt.Errorf("update of slot %d, which is empty", slot)
		}
		q.vis.remove(n)
		n.visible, n.version, n.tag = visible, ver, tag
		if hasContent == 1 {
			n.content = content
		}
		q.vis.add(slot, n, false)
	case recDelete:
		slot := d.u32()
		if err := d.done(); err != nil {
			return err
		}
		n := q.store.lookup(slot)
		if n == nil {
			return fmt.Errorf("delete of slot %d, which is empty", slot)
		}
		q.remove(slot, n)
	case recClear:
		if err := d.done(); err != nil {
			return err
		}
		q.clearLocked()
	default:
		return fmt.Errorf("unknown record type %d", op)
	}
	return nil
}

// restore puts the message n back in slot while replaying or loading a
// snapshot. A slot that is still taken held a message that expired and
// was purged (the one change the log does not record, since the clock
// decides it): it goes now. fromPut says n is replayed from its Put,
// which lets the visibility index use its rings as Put did.
func (q *Queue) restore(slot uint32, n node, fromPut bool) {
	p := q.store.allocAt(slot)
	if p == nil {
		q.remove(slot, q.store.at(slot))
		p = q.store.allocAt(slot)
	}
	*p = n
	if n.expires != neverExpires {
		q.expiry.push(expiryEntry{at: n.expires, slot: slot, stamp: uint32(n.seq)})
	}
	q.vis.add(slot, p, fromPut && n.version == 0)
	q.count++
}

// remove deletes the message n in slot, as Delete does.
func (q *Queue) remove(slot uint32, n *node) {
	q.vis.remove(n)
	q.forgetExpiry(n)
	q.store.release(slot)
	q.count--
	q.compactLazy()
}

// fail is the log's failure callback: every queue refuses further
// operations with err, and waiting Receive calls return it.
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

// The records of changes, appended by the operations while they hold the
// queue's lock; each returns the record's number for wal.wait.

func (q *Queue) logPut(slot uint32, n *node) uint64 {
	b, start := q.wal.begin()
	e := enc(b).op(recPut, q.qid).u(uint64(slot)).id(n.id).i(n.inserted).u(uint64(n.visible-n.inserted)).
		expiry(n.inserted, n.expires).u64(n.tag).str(n.content)
	return q.wal.end(e, start)
}

func (q *Queue) logGet(visible int64, msgs []Message) uint64 {
	b, start := q.wal.begin()
	e := enc(b).op(recGet, q.qid).i(visible).u(uint64(len(msgs)))
	for i := range msgs {
		r := msgs[i].PopReceipt
		e = e.u(uint64(r.slotNo)).u(uint64(msgs[i].DequeueCount)).u(uint64(r.version)).u64(r.tag)
	}
	return q.wal.end(e, start)
}

func (q *Queue) logUpdate(slot uint32, n *node, content *string) uint64 {
	b, start := q.wal.begin()
	e := enc(b).op(recUpdate, q.qid).u(uint64(slot)).i(n.visible).u(uint64(n.version)).u64(n.tag)
	if content != nil {
		e = append(e, 1).str(*content)
	} else {
		e = append(e, 0)
	}
	return q.wal.end(e, start)
}

func (q *Queue) logDelete(slot uint32) uint64 {
	b, start := q.wal.begin()
	return q.wal.end(enc(b).op(recDelete, q.qid).u(uint64(slot)), start)
}

// logOp logs a record of op with no fields but the queue: Clear, Delete
// Queue.
func (q *Queue) logOp(op byte) uint64 {
	b, start := q.wal.begin()
	return q.wal.end(enc(b).op(op, q.qid), start)
}

func (q *Queue) logMetadata(md map[string]string) uint64 {
	b, start := q.wal.begin()
	return q.wal.end(enc(b).op(recMetadata, q.qid).metadata(md), start)
}

func (q *Queue) logPolicies(ps []AccessPolicy) uint64 {
	b, start := q.wal.begin()
	return q.wal.end(enc(b).op(recPolicies, q.qid).policies(ps), start)
}

func (q *Queue) logCreate() uint64 {
	b, start := q.wal.begin()
	return q.wal.end(enc(b).op(recCreateQueue, q.qid).str(q.name).metadata(q.metadata), start)
}

// checkpoint writes a snapshot of the Service and starts a new log
// segment, then removes the files the snapshot makes unnecessary.
//
// It stops the world briefly: with the Service's lock and every queue's
// lock held it starts the new segment and copies the queues' state
// (shallowly: contents are immutable strings), so the snapshot is exactly
// the state the old segments made. Encoding and writing the snapshot then
// happen with no lock held while operations go on into the new segment.
func (s *Service) checkpoint() error {
	d := s.dur
	d.ckptMu.Lock()
	defer d.ckptMu.Unlock()

	s.mu.Lock()
	if s.closed || s.failure != nil {
		s.mu.Unlock()
		return s.failure
	}
	var qs []*Queue
	s.queues.Scan(func(_ string, q *Queue) bool { qs = append(qs, q); return true })
	for _, q := range qs {
		q.mu.Lock()
	}
	gen := d.gen + 1
	name := segName(d.dir, gen)
	f, err := d.fs.Create(name)
	if err == nil {
		if err = d.fs.SyncDir(d.dir); err != nil {
			f.Close()
		}
	}
	if err == nil {
		err = d.w.rotate(f, name)
	}
	var img image
	if err == nil {
		d.gen = gen
		img = s.captureLocked(qs)
	}
	for _, q := range qs {
		q.mu.Unlock()
	}
	s.mu.Unlock()
	if err != nil {
		// The old segment is intact and still current; nothing is lost.
		return fmt.Errorf("azq: checkpoint: %w", err)
	}
	if err := d.writeSnapshot(gen, &img); err != nil {
		// The log still holds everything; the next checkpoint tries again.
		return fmt.Errorf("azq: checkpoint: %w", err)
	}
	names, err := d.fs.List(d.dir)
	if err != nil {
		return nil
	}
	for _, n := range names {
		if g, ok := parseGen(n, "wal"); ok && g < gen {
			d.fs.Remove(filepath.Join(d.dir, n))
		} else if g, ok := parseGen(n, "snap"); ok && g < gen {
			d.fs.Remove(filepath.Join(d.dir, n))
		}
	}
	return nil
}

// writeSnapshot writes img as snap-gen: to a temporary file, synced, then
// renamed into place, and the rename made durable by syncing the
// directory.
func (d *durable) writeSnapshot(gen uint64, img *image) error {
	final := snapName(d.dir, gen)
	tmp := final + ".tmp"
	f, err := d.fs.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = img.encode(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(tmp, final)
	}
	if err == nil {
		err = d.fs.SyncDir(d.dir)
	}
	if err != nil {
		d.fs.Remove(tmp)
	}
	return err
}

// closeDurable checkpoints, closes the log and releases the directory.
func (s *Service) closeDurable() error {
	d := s.dur
	var errs []error
	s.mu.Lock()
	failed, closed := s.failure, s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	if failed != nil {
		errs = append(errs, failed)
	} else if err := s.checkpoint(); err != nil {
		errs = append(errs, err)
	}
	for _, q := range s.closeQueues() {
		q.mu.Lock()
		if !q.closed {
			q.shut()
		}
		q.mu.Unlock()
	}
	if err := d.w.close(); err != nil && failed == nil {
		errs = append(errs, err)
	}
	if err := d.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
