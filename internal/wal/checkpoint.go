package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/azqlib/azq/internal/vfs"
)

// checkpointFrameBytes is the payload at which an Encoder closes a records
// frame.
const checkpointFrameBytes = 256 << 10

// Encoder writes a checkpoint, in the format of a checkpoint file, to an
// io.Writer: a header, the records in frames, and a seal that counts
// them, so that a reader tells a whole checkpoint from a cut one.
type Encoder struct {
	w        io.Writer
	buf      []byte
	start    int    // where the open records frame starts in buf; -1 if none
	keySum   uint32 // the file's key's
	chain    uint32 // the header checksum of the last frame finished
	frameSeq uint64 // the records before the open frame
	records  uint64
	err      error
}

// NewEncoder starts a checkpoint of generation gen holding the state as
// of record base (both 0 for a checkpoint that belongs to no log), which
// depends on the older checkpoints deps (see CreateCheckpoint).
func NewEncoder(w io.Writer, gen uint64, base LSN, deps ...uint64) *Encoder {
	key := newKey()
	buf, chain := appendHeaderFrame(nil, checkpointMagic, fileHeader{key: key, gen: gen, base: base, deps: deps})
	return &Encoder{w: w, start: -1, buf: buf, keySum: key.sum(), chain: chain}
}

// Append adds the record rec (at most MaxRecord bytes).
func (e *Encoder) Append(rec []byte) error {
	if e.err != nil {
		return e.err
	}
	if len(rec) > MaxRecord {
		return fmt.Errorf("wal: a record of %d bytes is larger than MaxRecord", len(rec))
	}
	if e.start >= 0 && len(e.buf)-e.start+len(rec)+binary.MaxVarintLen32 > checkpointFrameBytes {
		e.closeFrame()
		e.flush()
	}
	if e.start < 0 {
		e.buf, e.start = reserveFrame(e.buf)
		e.frameSeq = e.records
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(len(rec)))
	e.buf = append(e.buf, rec...)
	e.records++
	return e.err
}

func (e *Encoder) closeFrame() {
	if e.start >= 0 {
		e.chain = finishFrame(e.buf[e.start:], len(e.buf)-e.start-frameHeaderSize, kindRecords, e.keySum, e.chain, e.frameSeq)
		e.start = -1
	}
}

func (e *Encoder) flush() {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

// Close writes what is buffered and the seal.
func (e *Encoder) Close() error {
	e.closeFrame()
	e.buf, e.chain = appendFrame(e.buf, kindSeal, sealPayload(e.records), e.keySum, e.chain, e.records)
	e.flush()
	return e.err
}

// ReadCheckpoint reads the checkpoint data, the contents of the file
// name, of format 2 or 1, calling fn with each record in order. It
// returns the checkpoint's generation, base LSN and dependencies. Any
// damage, a cut end included, is a *CorruptError: a checkpoint is synced
// whole before it is used, so it has no torn tail.
func ReadCheckpoint(name string, data []byte, fn func(rec []byte) error) (gen uint64, base LSN, deps []uint64, err error) {
	h, c, err := checkpointHeader(name, data)
	if err != nil {
		return 0, 0, nil, err
	}
	var records uint64
	for sealed := false; ; {
		off := c.off()
		corrupt := func(reason string) error { return &CorruptError{File: name, Offset: int64(off), Reason: reason} }
		if off == len(data) {
			if !sealed {
				return 0, 0, nil, corrupt("the checkpoint ends early")
			}
			return h.gen, h.base, h.deps, nil
		}
		kind, p, bad := c.next(records)
		switch {
		case bad != "":
			return 0, 0, nil, corrupt(bad)
		case sealed:
			return 0, 0, nil, corrupt("data after the seal")
		case kind == kindRecords:
			err := forRecords(p, func(rec []byte) error {
				records++
				return fn(rec)
			})
			if err != nil {
				return 0, 0, nil, corrupt(err.Error())
			}
		case kind == kindSeal:
			n, err := parseSeal(p)
			if err != nil {
				return 0, 0, nil, corrupt(err.Error())
			}
			if n != records {
				return 0, 0, nil, corrupt(fmt.Sprintf("the seal counts %d records, the checkpoint holds %d", n, records))
			}
			sealed = true
		default:
			return 0, 0, nil, corrupt(fmt.Sprintf("a frame of kind %d out of place", kind))
		}
	}
}

// checkpointFrames walks the frames of a checkpoint after its header, of
// format 2 (r) or format 1.
type checkpointFrames struct {
	r  frameReader
	v1 bool
}

func (c *checkpointFrames) off() int { return c.r.off }

// next reads the frame at off(), which follows records records, and moves
// past it: its kind and payload, or why it is not the next valid frame.
func (c *checkpointFrames) next(records uint64) (kind byte, p []byte, bad string) {
	if c.v1 {
		kind, p, bad = frame1At(c.r.data, c.r.off)
		if bad == "" {
			c.r.off += frame1HeaderSize + len(p)
		}
		return kind, p, bad
	}
	c.r.seq = records
	kind, p, bad, err := c.r.next()
	if err != nil {
		bad = err.Error()
	}
	return kind, p, bad
}

// checkpointHeader reads the header that starts the checkpoint data, the
// contents of the file name: its generation, base LSN and the generations
// it depends on (each older than it, in increasing order), and the frames
// after it.
func checkpointHeader(name string, data []byte) (fileHeader, *checkpointFrames, error) {
	corrupt := func(reason string) error { return &CorruptError{File: name, Offset: 0, Reason: reason} }
	if len(data) == 0 {
		return fileHeader{}, nil, corrupt("the checkpoint ends early")
	}
	h, r, bad, err := readHeader(data, checkpointMagic)
	if bad != "" {
		return fileHeader{}, nil, corrupt(bad)
	}
	if err != nil {
		return fileHeader{}, nil, corrupt(err.Error())
	}
	for i, d := range h.deps {
		if d >= h.gen || i > 0 && d <= h.deps[i-1] {
			return fileHeader{}, nil, corrupt(fmt.Sprintf("it depends on generation %d, out of order", d))
		}
	}
	return h, &checkpointFrames{r: r, v1: h.format == 1}, nil
}

// errGeneration reports the file name whose header names generation gen,
// not the one its name does.
func errGeneration(name string, gen uint64) error {
	return &CorruptError{File: name, Offset: 0, Reason: fmt.Sprintf("the header names generation %d", gen)}
}

// CheckpointWriter writes checkpoint gen of a log: to a temporary file,
// renamed into place by Commit once it and the log are durable.
type CheckpointWriter struct {
	l     *Log
	gen   uint64
	deps  []uint64
	tmp   string
	final string
	f     vfs.File
	pw    *pacedWriter
	off   int64 // bytes written
	enc   *Encoder
}

// CreateCheckpoint starts checkpoint gen, holding the state as of record
// base: Rotate's results. A checkpoint may leave parts of the state to
// older checkpoints, deps, which are then kept as long as it is the
// newest, and whose records Open replays (Replay.Dependency) before its
// own.
func (l *Log) CreateCheckpoint(gen uint64, base LSN, deps ...uint64) (*CheckpointWriter, error) {
	deps = slices.Clone(deps)
	slices.Sort(deps)
	deps = slices.Compact(deps)
	for _, d := range deps {
		if d >= gen {
			return nil, fmt.Errorf("wal: checkpoint %d cannot depend on checkpoint %d", gen, d)
		}
	}
	final := CheckpointName(l.dir, gen)
	c := &CheckpointWriter{l: l, gen: gen, deps: deps, tmp: final + tmpSuffix, final: final}
	f, err := l.fs.Create(c.tmp)
	if err != nil {
		return nil, err
	}
	c.f, c.pw = f, &pacedWriter{f: f}
	c.enc = NewEncoder(c, gen, base, deps...)
	return c, nil
}

// writeBackBytes is how much of a checkpoint, or of a new segment's
// allotment, is written before it is written back to the disk (where the
// file system can).
const writeBackBytes = 256 << 10

// pacedWriter writes a file that nothing waits for, writing back each
// writeBackBytes it wrote and waiting for that, then leaving the disk to
// others for as long: a checkpoint of a million messages is about 70 MB,
// which written back in one burst at the final sync would make each of
// the log's syncs meanwhile wait for all of it; this way a sync of the
// log waits for at most one step of it, and half the time for none, at
// the cost of a checkpoint that takes about twice as long, off the
// request path.
type pacedWriter struct {
	f    vfs.File
	back int64 // bytes written back
}

func (w *pacedWriter) write(p []byte, off int64) error {
	n, err := w.f.WriteAt(p, off)
	end := off + int64(n)
	if wb, ok := w.f.(vfs.RangeWriter); ok && err == nil && end-w.back >= writeBackBytes {
		start := time.Now()
		err = wb.WriteBack(w.back, end-w.back)
		w.back = end
		time.Sleep(time.Since(start))
	}
	return err
}

// Write is the Encoder's way to the file.
func (c *CheckpointWriter) Write(p []byte) (int, error) {
	if err := c.pw.write(p, c.off); err != nil {
		return 0, err
	}
	c.off += int64(len(p))
	return len(p), nil
}

// Append adds a record.
func (c *CheckpointWriter) Append(rec []byte) error { return c.enc.Append(rec) }

// Commit makes the checkpoint the log's newest: it writes and syncs the
// file, waits until everything the log holds so far is durable (the
// switch to segment gen among it), renames the file into place and syncs
// the directory. Then it removes the segments and checkpoints that
// checkpoint gen replaces, as far as it can: one that stays is removed by
// the next checkpoint, or the next Open. On failure the file is removed
// and the log goes on as before: its older files still hold everything.
func (c *CheckpointWriter) Commit() error {
	err := c.enc.Close()
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	if err == nil {
		err = c.l.Sync()
	}
	if err == nil {
		err = c.l.fs.Rename(c.tmp, c.final)
	}
	if err == nil {
		err = c.l.fs.SyncDir(c.l.dir)
	}
	if err != nil {
		c.l.fs.Remove(c.tmp)
		return err
	}
	l := c.l
	l.mu.Lock()
	l.ckptGen, l.keep = c.gen, c.deps
	for len(l.segs) > 0 && l.segs[0].gen < c.gen {
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	l.removeBefore(c.gen, c.deps)
	return nil
}

// Abort abandons the checkpoint and removes its file.
func (c *CheckpointWriter) Abort() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
	c.l.fs.Remove(c.tmp)
}

// removeBefore removes the segments and checkpoints older than gen, which
// checkpoint gen makes unnecessary, but the checkpoints keep, which it
// depends on. The removals need no directory sync: a file that comes back
// after a crash is older than the newest checkpoint, which recovery
// starts from, and is removed again.
func (l *Log) removeBefore(gen uint64, keep []uint64) error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		g, ok := parseGen(n, segmentPrefix)
		if !ok {
			g, ok = parseGen(n, checkpointPrefix)
		}
		if ok && g < gen && !(strings.HasPrefix(n, checkpointPrefix) && slices.Contains(keep, g)) {
			if err := l.remove(filepath.Join(l.dir, n)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeStepBytes is how much of a file remove frees at a time.
const removeStepBytes = 4 << 20

// remove removes the file name, first cutting a large one down a step at
// a time, with a pause as long as each step took. Freeing the extents of
// a checkpoint of tens of megabytes at once makes the file system's
// journal busy long enough that a sync of the log meanwhile takes 10-15
// ms instead of a fraction of one; in steps it takes no longer than one
// step's share.
func (l *Log) remove(name string) error {
	if f, err := l.fs.OpenRW(name); err == nil {
		size, err := f.Size()
		for err == nil && size > removeStepBytes {
			start := time.Now()
			size -= removeStepBytes
			err = f.Truncate(size)
			time.Sleep(time.Since(start))
		}
		f.Close()
	}
	return l.fs.Remove(name)
}

// isTemporary reports whether name is a checkpoint that a crash
// interrupted.
func isTemporary(name string) bool {
	return strings.HasPrefix(name, checkpointPrefix) && strings.HasSuffix(name, tmpSuffix)
}
