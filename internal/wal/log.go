package wal

import (
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/azqlib/azq/internal/vfs"
)

// Options configure a Log.
type Options struct {
	// FS is the file system; nil means vfs.OS.
	FS vfs.FS
	// SyncInterval is zero for Wait to return only once its record is
	// synced (group commit). Otherwise Wait returns once the record is
	// written to the operating system, and a sync follows within
	// SyncInterval.
	SyncInterval time.Duration
	// CheckpointBytes is the size of the current segment at which Due is
	// signalled; zero or less, never.
	CheckpointBytes int64
	// OnFailure, if set, is called once with the log's *FailedError, by
	// the goroutine that met the failure, with none of the log's locks
	// held: the caller's chance to stop accepting work.
	OnFailure func(error)
	// AllotBytes is how much zeroed space a segment is given at a time;
	// zero means 1 MiB.
	AllotBytes int64
}

// segment is a segment file being written.
type segment struct {
	gen   uint64
	name  string
	f     vfs.File
	size  int64 // bytes of frames written
	alloc int64 // bytes allotted: the frames, then zeros
	dirty bool  // bytes written and not yet synced
	// The sum of the file's key, and the header checksum of its last
	// frame finished: what the next frame's header carries. Only the
	// writer (or Open, or Prepare, before the segment is shared) sets
	// them.
	keySum, chain uint32
}

// frameSpan is a frame in a buffer of frames not yet written, whose
// header is filled in when it is written (finishFrame).
type frameSpan struct {
	start, end int    // where it starts and ends in the buffer; end -1 while open
	kind       byte   // kindRecords or kindSeal
	seq        uint64 // the records of the log before it
}

// pending is the frames of one segment not yet written.
type pending struct {
	seg    *segment
	buf    []byte
	frames []frameSpan // the frames in buf, to finish
	upto   LSN         // the last record among them (or before them)
	seal   bool        // buf ends with the segment's seal: close it after
	// Set when a writer takes it: where to write, and the allotment.
	off, alloc int64
}

// Log is an open log: records are appended in memory under a short lock
// and made durable by group commit.
//
// Group commit needs no goroutine of its own. Each caller appends its
// record (Append) while it holds whatever lock orders its changes, which
// puts the log in that order, then releases the lock and calls Wait. The
// first waiter to find no write in progress becomes the writer: it takes
// everything buffered, writes it and syncs it without the log's lock,
// while later callers append to a fresh buffer and wait. When the writer
// is done, every caller whose record was in its write returns, and one of
// the rest leads the next write. So concurrent callers share one sync,
// and a lone caller pays exactly one.
type Log struct {
	fs      vfs.FS
	dir     string
	lock    io.Closer
	opts    Options
	allot   int64
	onFail  func(error)
	due     chan struct{}
	timerWG sync.WaitGroup // the interval sync's timer callback, while armed or running

	mu   sync.Mutex // guards the fields below
	cond sync.Cond  // broadcast when a write ends, or the log fails or closes

	cur      *segment    // the segment appended to
	buf      []byte      // cur's frames not yet written
	frames   []frameSpan // the frames in buf; the last one's end is -1 while open
	retiring []pending   // segments switched away from, with their last frames
	prepared *segment    // the next segment, created ahead by Prepare
	nextGen  uint64      // the generation Prepare creates
	segs     []*segment  // the segments since the newest checkpoint, cur last
	ckptGen  uint64      // generation of the newest checkpoint; 0 if none
	keep     []uint64    // the older checkpoints it depends on

	appended  LSN    // the last record appended
	written   LSN    // ... written to the operating system
	synced    LSN    // ... written and synced
	rounds    uint64 // writes started
	syncRound uint64 // the last write started that synced, once it ended

	busy      bool        // a writer is at work without mu held
	preparing bool        // a Prepare is at work without mu held
	err       error       // the first failure; sticky
	notify    bool        // err is set and onFail not yet called
	closed    bool        // Close or Abandon was called
	timer     *time.Timer // the pending interval sync; nil if none
	spare     []byte      // the buffer of the last write, for reuse
	spareFr   []frameSpan // ... and its frames
	work      []pending   // the last write's work, for reuse
	stats     Stats
}

// Stats count a Log's writes.
type Stats struct {
	Writes   int64         // writes of buffered records
	Syncs    int64         // syncs (fsync or fdatasync) of the log
	MaxSync  time.Duration // the slowest of them
	SyncTime time.Duration // all of them together
	// MaxWrite is the slowest write, its syncs included, and
	// MaxSwitchWrite the slowest of those that also closed a segment
	// switched away from.
	MaxWrite, MaxSwitchWrite time.Duration
}

const defaultAllot = 1 << 20

var zeros = make([]byte, writeBackBytes)

// Append appends the record rec (at most MaxRecord bytes; the caller
// keeps rec) and returns its LSN. It never waits for a write.
func (l *Log) Append(rec []byte) LSN {
	if len(rec) > MaxRecord {
		panic("wal: a record larger than MaxRecord")
	}
	need := len(rec) + binary.MaxVarintLen32
	l.mu.Lock()
	n := len(l.frames)
	if n == 0 || l.frames[n-1].end >= 0 || len(l.buf)-l.frames[n-1].start-frameHeaderSize+need > batchBytes {
		l.closeFrameLocked()
		var start int
		l.buf, start = reserveFrame(l.buf)
		l.frames = append(l.frames, frameSpan{start: start, end: -1, kind: kindRecords, seq: l.appended})
	}
	l.buf = binary.AppendUvarint(l.buf, uint64(len(rec)))
	l.buf = append(l.buf, rec...)
	l.appended++
	lsn := l.appended
	l.mu.Unlock()
	return lsn
}

// closeFrameLocked ends the open records frame of buf, if any.
func (l *Log) closeFrameLocked() {
	if n := len(l.frames); n > 0 && l.frames[n-1].end < 0 {
		l.frames[n-1].end = len(l.buf)
	}
}

// LastLSN returns the LSN of the last record appended.
func (l *Log) LastLSN() LSN {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appended
}

// Wait returns once record lsn is durable as the sync policy defines it:
// synced (group commit), or written to the operating system (interval
// sync; the sync follows within the interval). It returns the log's
// *FailedError instead if the log failed first, and ErrClosed if the log
// was closed first.
func (l *Log) Wait(lsn LSN) error {
	l.mu.Lock()
	sync := l.opts.SyncInterval <= 0
	err := l.leadLocked(sync, func() bool {
		if sync {
			return l.synced >= lsn
		}
		return l.written >= lsn
	})
	l.unlock()
	return err
}

// Sync returns once everything appended so far is synced, and every
// segment switched away from is sealed and synced.
func (l *Log) Sync() error {
	l.mu.Lock()
	err := l.syncAllLocked()
	l.unlock()
	return err
}

// unlock releases mu and then, if the log has just failed, tells OnFailure.
func (l *Log) unlock() {
	notify, err := l.notify, l.err
	l.notify = false
	l.mu.Unlock()
	if notify && l.onFail != nil {
		l.onFail(err)
	}
}

// pendingLocked reports whether anything is buffered, or written and not
// synced.
func (l *Log) pendingLocked() bool {
	return len(l.buf) > 0 || len(l.retiring) > 0 || l.cur.dirty || l.busy
}

// syncAllLocked leads or waits for a sync that starts after now, so that
// everything appended and every switch of segments made before now is
// durable.
func (l *Log) syncAllLocked() error {
	if !l.pendingLocked() && l.err == nil {
		return nil
	}
	need := l.rounds + 1
	return l.leadLocked(true, func() bool { return l.syncRound >= need })
}

// leadLocked waits until done reports true, leading writes (with a sync
// if sync is set) while no other writer is at work. l.mu must be held; it
// is released while this goroutine writes.
func (l *Log) leadLocked(sync bool, done func() bool) error {
	yielded := false
	for {
		if l.err != nil {
			return l.err
		}
		if done() {
			return nil
		}
		if l.busy {
			l.cond.Wait()
			continue
		}
		if l.closed {
			return ErrClosed
		}
		if !yielded {
			// Before leading, let the callers that the last write
			// released run first: each appends its next record, which
			// then joins this write instead of waiting for the next.
			// Without this, concurrent callers split into two groups
			// whose writes alternate, each sync carrying half of them.
			yielded = true
			l.mu.Unlock()
			runtime.Gosched()
			l.mu.Lock()
			continue
		}
		l.writeLocked(sync)
	}
}

// writeLocked takes everything buffered and writes it, syncing it if sync
// is set, without mu held. Segments switched away from are always synced,
// sealed and closed, before anything is written to the next: a segment is
// never written to while the one before it is unsealed.
func (l *Log) writeLocked(sync bool) {
	l.busy = true
	l.rounds++
	round := l.rounds
	l.closeFrameLocked()
	work := append(append(l.work[:0], l.retiring...), pending{seg: l.cur, buf: l.buf, frames: l.frames, upto: l.appended})
	l.retiring = l.retiring[:0]
	for i := range work {
		work[i].off, work[i].alloc = work[i].seg.size, work[i].seg.alloc
	}
	l.buf, l.frames = l.spare[:0], l.spareFr[:0]
	l.mu.Unlock()
	began := time.Now()

	var (
		err      error
		failed   *segment
		op       string
		syncs    []time.Duration
		lastSync bool // the last segment's write was synced, or had nothing to sync
	)
	for i := range work {
		p := &work[i]
		last := i == len(work)-1
		// A segment switched away from is synced with its seal; the last
		// one is synced if asked and there is something to sync.
		syncIt := !last || sync && (len(p.buf) > 0 || p.seg.dirty)
		var d time.Duration
		if d, op, err = l.writePending(p, syncIt); err != nil {
			failed = p.seg
			break
		}
		if d >= 0 {
			syncs = append(syncs, d)
		}
		if p.seal {
			// Sealed and synced: nothing writes it again. Closed here,
			// not under mu, which every Append takes.
			p.seg.f.Close()
			p.seg.f = nil
		}
		if last {
			lastSync = d >= 0 || len(p.buf) == 0 && !p.seg.dirty
		}
	}

	l.mu.Lock()
	l.busy = false
	l.work = work
	last := &work[len(work)-1]
	l.spare, l.spareFr = last.buf[:0], last.frames[:0]
	l.stats.Writes++
	took := time.Since(began)
	l.stats.MaxWrite = max(l.stats.MaxWrite, took)
	if len(work) > 1 {
		l.stats.MaxSwitchWrite = max(l.stats.MaxSwitchWrite, took)
	}
	for _, d := range syncs {
		l.stats.Syncs++
		l.stats.SyncTime += d
		l.stats.MaxSync = max(l.stats.MaxSync, d)
	}
	if err != nil {
		l.failLocked(&FailedError{Op: op, File: failed.name, Err: err})
		l.cond.Broadcast()
		return
	}
	for i := range work {
		p := &work[i]
		p.seg.size, p.seg.alloc = p.off, p.alloc
	}
	l.written = last.upto
	if lastSync {
		l.synced = last.upto
		last.seg.dirty = false
		l.syncRound = round
	} else {
		// The last segment was written, not synced; every one before it
		// was synced with its seal.
		if len(work) > 1 {
			l.synced = max(l.synced, work[len(work)-2].upto)
		}
		last.seg.dirty = true
		l.armSyncLocked()
	}
	if l.opts.CheckpointBytes > 0 && l.cur.size >= l.opts.CheckpointBytes {
		select {
		case l.due <- struct{}{}:
		default:
		}
	}
	l.cond.Broadcast()
}

// writePending writes p's frames at p.off, allotting space first if they
// need more, and syncs if syncIt is set or the file grew. It returns how
// long the sync took (-1 if none), or what failed. Only the writer calls
// it.
func (l *Log) writePending(p *pending, syncIt bool) (time.Duration, string, error) {
	// The headers, in order: each frame's carries the checksum of the
	// one before it.
	seg := p.seg
	for _, fr := range p.frames {
		seg.chain = finishFrame(p.buf[fr.start:], fr.end-fr.start-frameHeaderSize, fr.kind, seg.keySum, seg.chain, fr.seq)
	}
	grew := false
	if need := p.off + int64(len(p.buf)); need > p.alloc {
		end := (need/l.allot + 1) * l.allot
		if err := writeZeros(p.seg.f, p.alloc, end); err != nil {
			return -1, "allot", err
		}
		p.alloc = end
		grew = true
	}
	if len(p.buf) > 0 {
		if _, err := p.seg.f.WriteAt(p.buf, p.off); err != nil {
			return -1, "write", err
		}
		p.off += int64(len(p.buf))
	}
	if !syncIt && !grew {
		return -1, "", nil
	}
	start := time.Now()
	var err error
	if grew {
		// The file's size changed: only fsync commits that.
		err = p.seg.f.Sync()
	} else {
		err = p.seg.f.Datasync()
	}
	if err != nil {
		return -1, "sync", err
	}
	return time.Since(start), "", nil
}

// writeZeros writes zeros to f from off to end.
func writeZeros(f vfs.File, off, end int64) error {
	for off < end {
		n := min(end-off, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// armSyncLocked schedules the interval sync of what was written.
func (l *Log) armSyncLocked() {
	if l.timer == nil && !l.closed && l.opts.SyncInterval > 0 {
		l.timerWG.Add(1)
		l.timer = time.AfterFunc(l.opts.SyncInterval, l.syncTick)
	}
}

// syncTick is the interval sync.
func (l *Log) syncTick() {
	defer l.timerWG.Done()
	l.mu.Lock()
	l.timer = nil
	if !l.closed {
		l.syncAllLocked()
	}
	l.unlock()
}

// failLocked records the log's first failure.
func (l *Log) failLocked(err error) {
	if l.err == nil {
		l.err = err
		l.notify = true
	}
}

// Stats returns the log's counts of writes and syncs since Open (or the
// last ResetStats).
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// ResetStats sets the counts of Stats back to zero.
func (l *Log) ResetStats() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats = Stats{}
}

// Due is signalled (it never closes) when the current segment has grown
// past Options.CheckpointBytes: a checkpoint would let recovery replay
// less. Rotate takes back a signal not yet received.
func (l *Log) Due() <-chan struct{} { return l.due }

// Bytes returns the bytes of the segments since the newest checkpoint:
// what recovery would replay now.
func (l *Log) Bytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n + int64(len(l.buf))
}

// Prepare creates the next segment ahead of Rotate: created, allotted,
// synced, and its directory entry synced, all without the log's lock, so
// that Rotate costs no I/O. It does nothing if a segment is prepared.
// A failure leaves the log as it was.
func (l *Log) Prepare() error {
	l.mu.Lock()
	if l.closed || l.prepared != nil || l.preparing {
		l.mu.Unlock()
		return nil
	}
	l.preparing = true
	gen := l.nextGen
	l.mu.Unlock()
	seg, err := l.createSegment(gen)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.preparing = false
	if err != nil {
		return err
	}
	if l.closed {
		seg.f.Close()
		return ErrClosed
	}
	l.prepared = seg
	l.nextGen = gen + 1
	return nil
}

// createSegment creates the empty segment gen, with its header and
// allotted, durable: a segment's header, which holds its key, is on disk
// before anything is appended to it, so that recovery can always tell the
// segment's own frames from anything else.
func (l *Log) createSegment(gen uint64) (*segment, error) {
	name := SegmentName(l.dir, gen)
	f, err := l.fs.Create(name)
	if err != nil {
		return nil, err
	}
	key := newKey()
	hdr, chain := appendHeaderFrame(nil, segmentMagic, fileHeader{key: key, gen: gen})
	_, err = f.WriteAt(hdr, 0)
	// Written back in steps, as a checkpoint is (CheckpointWriter.Write),
	// so that the log's syncs meanwhile do not wait for a megabyte.
	pw := &pacedWriter{f: f}
	size := int64(len(hdr))
	alloc := max(l.allot, size)
	for off := size; off < alloc && err == nil; {
		n := min(writeBackBytes, alloc-off)
		err = pw.write(zeros[:n], off)
		off += n
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		f.Close()
		l.fs.Remove(name)
		return nil, err
	}
	return &segment{gen: gen, name: name, f: f, size: size, alloc: alloc, keySum: key.sum(), chain: chain}, nil
}

// Rotate switches the log to the prepared segment: records appended from
// now on go to it, and the current segment is sealed by the next write.
// It does no I/O. It returns the new segment's generation and the LSN of
// the last record before it, for a checkpoint of the state as of then.
func (l *Log) Rotate() (gen uint64, base LSN, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.err != nil:
		return 0, 0, l.err
	case l.closed:
		return 0, 0, ErrClosed
	case l.prepared == nil:
		return 0, 0, errors.New("wal: Rotate without a prepared segment")
	}
	l.closeFrameLocked()
	buf, start := reserveFrame(l.buf)
	buf = append(buf, sealPayload(l.appended)...)
	frames := append(l.frames, frameSpan{start: start, end: len(buf), kind: kindSeal, seq: l.appended})
	old := pending{seg: l.cur, buf: buf, frames: frames, upto: l.appended, seal: true}
	l.retiring = append(l.retiring, old)
	l.cur, l.prepared = l.prepared, nil
	// A buffer of its own: old's is in retiring, and spare's will be
	// the next write's.
	l.buf, l.frames = nil, nil
	l.segs = append(l.segs, l.cur)
	// A signal still pending was about the segment switched away from.
	select {
	case <-l.due:
	default:
	}
	return l.cur.gen, l.appended, nil
}

// Close syncs what is left, stops the interval sync, closes the files and
// releases the directory. After Close, Wait returns ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	err := l.syncAllLocked()
	l.closed = true
	for l.busy {
		l.cond.Wait()
	}
	l.closeFilesLocked()
	l.cond.Broadcast()
	l.unlock()
	l.timerWG.Wait()
	if cerr := l.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// Abandon closes the log's files and releases the directory without
// writing or syncing anything buffered, as a process that dies would: for
// tests of recovery.
func (l *Log) Abandon() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	for l.busy {
		l.cond.Wait()
	}
	l.closeFilesLocked()
	l.cond.Broadcast()
	l.mu.Unlock()
	l.timerWG.Wait()
	l.lock.Close()
}

// closeFilesLocked closes every open file and stops the interval timer.
func (l *Log) closeFilesLocked() {
	if l.timer != nil && l.timer.Stop() {
		l.timerWG.Done()
	}
	l.timer = nil
	for _, p := range l.retiring {
		if p.seg.f != nil {
			p.seg.f.Close()
			p.seg.f = nil
		}
	}
	for _, s := range []*segment{l.cur, l.prepared} {
		if s != nil && s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
}
