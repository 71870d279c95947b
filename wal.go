package azq

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A log file (and a snapshot file, which uses the same framing) is a
// sequence of frames:
//
//	bytes 0-3   payload length n, little endian
//	bytes 4-7   CRC-32C (Castagnoli) of bytes 0-3 and the payload
//	bytes 8-    the payload, n bytes: one record
//
// The checksum covers the length too, so a damaged length is caught
// rather than followed into the middle of another record.
const (
	frameHeader = 8
	// maxFrame bounds a payload: a length above it is damage, not a
	// record (the largest record, a Get of 32 messages or a Put of the
	// largest message, is far smaller).
	maxFrame = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginFrame reserves a frame header at the end of b; endFrame fills it
// once the payload is appended.
func beginFrame(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0, 0, 0, 0, 0), len(b)
}

func endFrame(b []byte, start int) []byte {
	n := len(b) - start - frameHeader
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	crc := crc32.Update(0, castagnoli, b[start:start+4])
	crc = crc32.Update(crc, castagnoli, b[start+frameHeader:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// CorruptError reports damage in a log or snapshot file that is not a
// torn tail: a record that fails its checksum or does not decode, with
// valid data after it. azq refuses to open such a directory rather than
// recover part of a queue.
type CorruptError struct {
	File   string // the file's path
	Offset int64  // where the damaged record starts
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("azq: %s is corrupt at offset %d: %s", e.File, e.Offset, e.Reason)
}

// scanFrames calls fn with each frame's payload in data, which is the
// content of the file name. It returns the offset just past the last good
// frame.
//
// Zero bytes from a frame boundary to the end of the file are space the log
// allotted and never filled (no valid frame is all zeros): the end.
//
// The torn-tail rule: when the file ends inside a frame (a short header, or
// a length that runs past the end), or the last frame before the zeros
// fails its checksum, that tail is what a crash cut short: it was never acknowledged, so it is
// dropped. A bad frame with anything but zeros after it is damage, and a
// *CorruptError. With tornOK false (a file that was synced whole before it
// was closed: an older log segment, a snapshot) any bad frame is damage.
func scanFrames(name string, data []byte, tornOK bool, fn func(off int64, payload []byte) error) (int64, error) {
	off := 0
	for off < len(data) {
		rest := data[off:]
		bad := ""
		var n int
		switch {
		case len(rest) < frameHeader:
			bad = "truncated record header"
		default:
			n = int(binary.LittleEndian.Uint32(rest))
			switch {
			case n > maxFrame:
				bad = fmt.Sprintf("record length %d is over the limit", n)
			case frameHeader+n > len(rest):
				bad = fmt.Sprintf("record of %d bytes runs past the end of the file", n)
			default:
				crc := crc32.Update(0, castagnoli, rest[:4])
				crc = crc32.Update(crc, castagnoli, rest[frameHeader:frameHeader+n])
				if crc != binary.LittleEndian.Uint32(rest[4:]) {
					bad = "checksum mismatch"
				}
			}
		}
		if bad != "" {
			// Past the bad frame's end (or the file's, if that is
			// sooner): nothing but allotted zeros means it was the last.
			last := len(rest) < frameHeader || n <= maxFrame && allZero(rest[min(len(rest), frameHeader+n):])
			if allZero(rest) || tornOK && last {
				return int64(off), nil
			}
			return int64(off), &CorruptError{File: name, Offset: int64(off), Reason: bad}
		}
		if err := fn(int64(off), rest[frameHeader:frameHeader+n]); err != nil {
			return int64(off), &CorruptError{File: name, Offset: int64(off), Reason: err.Error()}
		}
		off += frameHeader + n
	}
	return int64(off), nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// wal is the write-ahead log: records appended under a queue's lock, made
// durable by group commit outside it.
//
// Group commit needs no goroutine of its own. Each caller appends its
// record to the shared buffer while it holds its queue's lock, which puts
// the log in the order the changes were made, then releases the lock and
// calls wait. The first waiter to find no write in progress becomes the
// leader: it takes the whole buffer, writes it and syncs it without the
// log's lock, while later callers append to a fresh buffer and wait. When
// the leader is done, every caller whose record was in its write returns,
// and one of the rest leads the next write. So concurrent callers share
// one fsync, and a lone caller pays exactly one.
type wal struct {
	mu   sync.Mutex // guards the fields below
	cond sync.Cond  // signalled when a write ends or the log fails

	f     file
	name  string // path of the current segment, for errors
	size  int64  // bytes of records written to the current segment
	alloc int64  // bytes of the segment allotted: records, then zeros

	buf      []byte // frames appended but not yet written
	spare    []byte // the buffer of the last write, for reuse
	appended uint64 // number of the last record appended
	written  uint64 // ... written to the file
	synced   uint64 // ... written and synced
	busy     bool   // a leader is writing without mu held
	err      error  // the first write or sync failure; sticky
	closed   bool

	// interval is zero to sync before each caller returns (group
	// commit), or the longest a written record waits for its sync.
	interval time.Duration
	timer    *time.Timer // the pending interval sync; nil if none

	// onFail is told of the first failure, without locks held.
	onFail func(error)
	// ckptBytes is the segment size past which a checkpoint is due;
	// checkpoint runs it, in the goroutine of the caller that noticed.
	ckptBytes  int64
	checkpoint func()
	ckptBusy   atomic.Bool
}

// begin starts a record: it locks the log and returns the buffer with a
// frame header reserved. The caller appends the payload and calls end.
func (w *wal) begin() ([]byte, int) {
	w.mu.Lock()
	return beginFrame(w.buf)
}

// end completes the record begun with begin and returns its number, which
// the caller passes to wait once it has released its queue's lock.
func (w *wal) end(b []byte, start int) uint64 {
	w.buf = endFrame(b, start)
	w.appended++
	lsn := w.appended
	w.mu.Unlock()
	return lsn
}

// current returns the number of the last record appended.
func (w *wal) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appended
}

// wait returns once record lsn is durable as the sync policy defines it:
// synced (group commit), or written to the operating system (interval
// sync; the sync follows within the interval). It returns the log's
// failure instead if the log failed before that.
func (w *wal) wait(lsn uint64) error {
	w.mu.Lock()
	err := w.flushLocked(lsn, w.interval == 0)
	due := err == nil && w.ckptBytes > 0 && w.size >= w.ckptBytes
	w.mu.Unlock()
	if due && w.checkpoint != nil && w.ckptBusy.CompareAndSwap(false, true) {
		w.checkpoint()
		w.ckptBusy.Store(false)
	}
	return err
}

// flushLocked makes record lsn written, and synced if sync is set, leading
// a write itself or waiting for the leader's. w.mu must be held; it is
// released while this goroutine writes.
func (w *wal) flushLocked(lsn uint64, sync bool) error {
	yielded := false
	for {
		if w.err != nil {
			return w.err
		}
		done := w.written
		if sync {
			done = w.synced
		}
		if done >= lsn {
			return nil
		}
		if w.busy {
			w.cond.Wait()
			continue
		}
		if w.closed {
			return errLogClosed
		}
		if !yielded {
			// Before leading, let the callers that the last write
			// released run first: each appends its next record, which
			// then joins this write instead of waiting for the next.
			// Without this, concurrent callers split into two groups
			// whose writes alternate, each sync carrying half of them.
			yielded = true
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
			continue
		}
		w.busy = true
		data, upto, f, off := w.buf, w.appended, w.f, w.size
		w.buf = w.spare[:0]
		doSync := sync
		w.mu.Unlock()
		// Records are written into space allotted ahead of them, filled
		// with zeros and synced whole, so that the file's size rarely
		// changes: then fdatasync has no metadata to commit, which makes
		// it several times cheaper than fsync of an appended file on
		// common file systems. Zeros are never a valid frame, so recovery
		// reads them as the end of the log.
		grew := false
		var err error
		if need := off + int64(len(data)); need > w.alloc {
			err = w.allot(f, need)
			grew = true
		}
		if err == nil && len(data) > 0 {
			_, err = f.WriteAt(data, off)
		}
		if err == nil && (doSync || grew) {
			if grew {
				err = f.Sync()
			} else {
				err = f.Datasync()
			}
		}
		w.mu.Lock()
		w.busy = false
		w.spare = data[:0]
		if err != nil {
			w.failLocked(fmt.Errorf("writing %s: %w", w.name, err))
		} else {
			w.written = upto
			w.size += int64(len(data))
			if doSync {
				w.synced = upto
			} else {
				w.armSyncLocked()
			}
		}
		w.cond.Broadcast()
	}
}

// allotChunk is how much zeroed space the log allots at a time.
const allotChunk = 1 << 20

var zeroChunk = make([]byte, allotChunk)

// allot extends the segment with zeros to past need. Only the leader
// calls it (or rotate, with the log locked and no leader).
func (w *wal) allot(f file, need int64) error {
	end := (need/allotChunk + 1) * allotChunk
	for w.alloc < end {
		n := min(end-w.alloc, allotChunk)
		if _, err := f.WriteAt(zeroChunk[:n], w.alloc); err != nil {
			return err
		}
		w.alloc += n
	}
	return nil
}

// armSyncLocked schedules the interval sync of what has been written.
func (w *wal) armSyncLocked() {
	if w.timer == nil && w.synced < w.written && !w.closed {
		w.timer = time.AfterFunc(w.interval, w.syncTick)
	}
}

// syncTick is the interval sync: it writes and syncs everything appended.
func (w *wal) syncTick() {
	w.mu.Lock()
	w.timer = nil
	if !w.closed {
		w.flushLocked(w.appended, true)
	}
	w.mu.Unlock()
}

// failLocked records the log's first failure. From then on every wait
// fails: after a failed fsync the kernel may have dropped the dirty pages
// and cleared the error, so a retry that succeeds would prove nothing
// (fsyncgate). The service learns of it through onFail, called without
// locks by a goroutine of its own, since the failing caller may hold
// locks onFail needs.
func (w *wal) failLocked(err error) {
	if w.err != nil {
		return
	}
	w.err = newError(ErrStorageFailure, "", "durable storage failed, so the service refuses further changes: "+err.Error())
	if w.onFail != nil {
		go w.onFail(w.err)
	}
}

var errLogClosed = newError(ErrQueueNotFound, "", "the service is closed")

// rotate flushes and syncs the current segment and switches to f. Every
// queue's lock is held (checkpoint), so nothing is appended meanwhile;
// w.mu is held throughout, which is fine for that rare stop.
func (w *wal) rotate(f file, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(w.appended, true); err != nil {
		f.Close()
		return err
	}
	// The old segment loses its allotted zeros: it is read whole again.
	err := w.f.Truncate(w.size)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.Close()
		w.failLocked(fmt.Errorf("closing %s: %w", w.name, err))
		return w.err
	}
	w.f, w.name, w.size, w.alloc = f, name, 0, 0
	return nil
}

// close flushes and syncs what is left, stops the interval timer and
// closes the segment.
func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	err := w.flushLocked(w.appended, true)
	if err == nil {
		err = w.f.Truncate(w.size)
		if err == nil {
			err = w.f.Sync()
		}
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	for w.busy { // a timer's sync that began before Stop
		w.cond.Wait()
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}
